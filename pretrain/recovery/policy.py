"""Pure recovery policy: an alarm + the run's state → one auditable :class:`Decision`.

    decision = decide_spike(alarm, kind="bad_batch", checkpoints=ckpts, run=run,
                            past_rollbacks=(), tokens_per_step=4096, cfg=PolicyConfig())
    decision.action         # "rollback"
    decision.to_json()      # goes into run tags and asset metadata

Rules (defaults in :class:`PolicyConfig`):

- a loss spike that recovers within ``bad_batch_steps`` is a bad batch → roll back and skip the
  steps ``[onset, recovery)`` (``recovery``: the first step back near the baseline, default
  ``spike + 1``); one that recovers slowly or not at all is a learning-rate problem →
  roll back and multiply ``lr_scale`` by ``lr_factor`` (0.8); a spike within
  ``repeat_window_steps`` of an earlier rollback's spike → both; NaN/inf → both (the batch that
  produced it is skipped too, and the LR lowered).
- the rollback target is the newest checkpoint with ``step < onset - rollback_margin_steps``
  labelled healthy; none → stop.
- escalation: when ``max_rollbacks_in_window`` rollbacks already happened with spikes within
  ``escalation_window_steps`` of this one, stop and alert instead (a human decides).
- grad_norm above the stop threshold → stop; plateau / grad-norm creep → reduce the LR from the
  latest checkpoint of the same branch (no rollback).

The resumed run goes to a new branch (:func:`next_branch`) so no checkpoint key is reused.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from pretrain.checkpoint.health import HEALTHY, PENDING, SUSPECT, CheckpointInfo
from pretrain.errors import ConfigError, DataError
from pretrain.recovery.detectors import GRAD_STOP, NONFINITE, SPIKE, Alarm
from pretrain.settings import check_types

ACTIONS = ("none", "warn", "rollback", "reduce_lr", "resume", "stop")


@dataclass(frozen=True, kw_only=True)
class PolicyConfig:
    """``lr_factor`` (0.8–0.9): LR multiplier per reduction. ``rollback_margin_steps``: the target
    checkpoint must precede the spike onset by more than this. ``repeat_window_steps``: a spike
    this close to an earlier rollback's spike counts as repeated. ``max_rollbacks_in_window`` /
    ``escalation_window_steps``: the rollback budget. ``health_window_steps``: a checkpoint is
    healthy once this many steps after it were logged without an alarm.
    ``evaluations_per_branch``: evaluations of one branch's checkpoints queued or running at a
    time (``eval_sensor`` holds the rest back, oldest first), so a burst of checkpoints never
    queues a burst of runs ahead of training."""

    lr_factor: float = 0.8
    rollback_margin_steps: int = 10
    repeat_window_steps: int = 1000
    max_rollbacks_in_window: int = 2
    escalation_window_steps: int = 1000
    health_window_steps: int = 20
    evaluations_per_branch: int = 1

    def __post_init__(self) -> None:
        check_types(self)
        if self.evaluations_per_branch < 1:
            raise ConfigError(
                f"policy.evaluations_per_branch={self.evaluations_per_branch} must be >= 1"
            )
        if not 0.8 <= self.lr_factor <= 0.9:
            raise ConfigError(f"policy.lr_factor={self.lr_factor} must be in [0.8, 0.9]")
        if self.rollback_margin_steps < 0 or self.health_window_steps < 1:
            raise ConfigError("policy.rollback_margin_steps must be >= 0, health_window_steps >= 1")
        if self.max_rollbacks_in_window < 1:
            raise ConfigError(
                "policy.max_rollbacks_in_window must be >= 1 (1: stop at the 2nd spike)"
            )
        if self.repeat_window_steps < 0 or self.escalation_window_steps < 0:
            raise ConfigError("policy.repeat_window_steps and escalation_window_steps must be >= 0")


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What the running training run was launched with (its Dagster run config)."""

    branch: str
    lr_scale: float = 1.0
    skip_windows: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One decision of the recovery loop; everything needed to act on it and to audit it."""

    action: str
    reason: str
    kind: str = ""
    branch: str = ""
    step: int | None = None
    spike_step: int | None = None
    onset_step: int | None = None
    checkpoint_key: str | None = None
    checkpoint_path: str | None = None
    checkpoint_step: int | None = None
    skip_window: tuple[int, int] | None = None
    skip_tokens: tuple[int, int] | None = None
    skip_windows: tuple[tuple[int, int], ...] = ()
    lr_scale: float = 1.0
    new_branch: str | None = None
    documents: dict[str, Any] | None = (
        None  # what the skip window held (pretrain.recovery.documents)
    )

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ConfigError(f"decision.action={self.action!r}; use one of {ACTIONS}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Decision:
        """The decision :meth:`to_json` wrote; ``DataError`` for any other text (a run tag
        edited by hand or by another tool), so that callers can skip it and say so."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise TypeError(f"a JSON {type(data).__name__}, not an object")
            for name in ("skip_window", "skip_tokens"):
                if data.get(name) is not None:
                    data[name] = tuple(data[name])
            data["skip_windows"] = tuple(tuple(w) for w in data.get("skip_windows", ()))
            _check_types(data)
            return cls(**data)
        except (TypeError, ValueError) as exc:  # JSONDecodeError and ConfigError are ValueErrors
            shown = text if len(text) <= 80 else text[:77] + "..."
            raise DataError(f"{shown!r} is not a recovery decision: {exc}") from exc

    def run_tags(self) -> dict[str, str]:
        """Dagster run tags (string values) that make the decision searchable in the UI."""
        tags = {
            "pretrain/decision": self.to_json(),
            "pretrain/action": self.action,
            "pretrain/reason": self.reason[:200],
        }
        for name in ("spike_step", "onset_step", "checkpoint_key", "new_branch"):
            if getattr(self, name) is not None:
                tags[f"pretrain/{name}"] = str(getattr(self, name))
        if self.skip_window is not None:
            tags["pretrain/skip_window"] = f"{self.skip_window[0]}-{self.skip_window[1]}"
        if self.documents and "num_documents" in self.documents:
            tags["pretrain/skipped_documents"] = str(self.documents["num_documents"])
            tags["pretrain/skipped_sources"] = json.dumps(self.documents["sources"])[:200]
        return tags


def _check_types(data: dict[str, Any]) -> None:
    """Field types of a decision read back from JSON (``TypeError`` naming the first wrong one)."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def is_window(v: Any) -> bool:
        return isinstance(v, tuple) and len(v) == 2 and all(is_int(x) for x in v)

    checks = {
        **dict.fromkeys(("action", "reason", "kind", "branch"), lambda v: isinstance(v, str)),
        **dict.fromkeys(
            ("checkpoint_key", "checkpoint_path", "new_branch"),
            lambda v: v is None or isinstance(v, str),
        ),
        **dict.fromkeys(
            ("step", "spike_step", "onset_step", "checkpoint_step"),
            lambda v: v is None or is_int(v),
        ),
        **dict.fromkeys(("skip_window", "skip_tokens"), lambda v: v is None or is_window(v)),
        "skip_windows": lambda v: all(is_window(w) for w in v),
        "lr_scale": lambda v: is_int(v) or isinstance(v, float),
        "documents": lambda v: v is None or isinstance(v, dict),
    }
    for name, ok in checks.items():
        if name in data and not ok(data[name]):
            raise TypeError(f"{name}={data[name]!r} has the wrong type")


def next_branch(branch: str) -> str:
    """``b00`` → ``b01``, ``exp-9`` → ``exp-10``, ``main`` → ``main-01`` (deterministic)."""
    match = re.search(r"(\d+)$", branch)
    if not match:
        return f"{branch}-01"
    digits = match.group(1)
    return f"{branch[: match.start()]}{int(digits) + 1:0{len(digits)}d}"


def label_checkpoint(
    step: int,
    *,
    scanned_through: int,
    first_step: int,
    flagged: Sequence[tuple[int, int]],
    cfg: PolicyConfig,
) -> str | None:
    """Health of the checkpoint at ``step`` from the steps after it.

    SUSPECT if an alarm range ``[start, end]`` in ``flagged`` overlaps ``(step, step + window]``;
    HEALTHY once the whole window has been scanned without one; PENDING before that; None when the
    window starts before ``first_step`` (the monitor never saw it: use the on-disk label)."""
    if step + 1 < first_step:
        return None
    end = step + cfg.health_window_steps
    if any(start <= end and stop > step for start, stop in flagged):
        return SUSPECT
    return HEALTHY if scanned_through >= end else PENDING


def choose_rollback_target(
    checkpoints: Sequence[CheckpointInfo], onset_step: int, cfg: PolicyConfig
) -> CheckpointInfo | None:
    """The newest HEALTHY checkpoint with ``step < onset_step - rollback_margin_steps``."""
    limit = onset_step - cfg.rollback_margin_steps
    found = [c for c in checkpoints if c.label == HEALTHY and c.step < limit]
    return max(found, key=lambda c: c.step) if found else None


class _SpikeFields(TypedDict):
    """The :class:`Decision` fields that every answer to a spike alarm carries."""

    branch: str
    step: int
    spike_step: int
    onset_step: int
    lr_scale: float
    skip_windows: tuple[tuple[int, int], ...]


def decide_spike(
    alarm: Alarm,
    *,
    kind: str | None,
    checkpoints: Sequence[CheckpointInfo],
    run: RunSettings,
    past_rollbacks: Sequence[int],
    tokens_per_step: int | None,
    cfg: PolicyConfig,
    window_end: int | None = None,
) -> Decision:
    """The decision for an alarm; ``kind`` is the recovery class of a SPIKE ("bad_batch"/"slow").

    ``past_rollbacks`` holds the spike steps of earlier rollbacks of this campaign;
    ``window_end`` the first step after the bad data (default: the step after the spike)."""
    base: _SpikeFields = {
        "branch": run.branch,
        "step": alarm.step,
        "spike_step": alarm.step,
        "onset_step": alarm.onset_step,
        "lr_scale": run.lr_scale,
        "skip_windows": run.skip_windows,
    }
    if alarm.kind == GRAD_STOP:
        return Decision(action="stop", kind=GRAD_STOP, reason=alarm.reason, **base)
    if alarm.kind not in (SPIKE, NONFINITE):
        raise ValueError(f"no spike policy for alarm kind {alarm.kind!r}")
    in_window = [s for s in past_rollbacks if abs(s - alarm.step) <= cfg.escalation_window_steps]
    if len(in_window) >= cfg.max_rollbacks_in_window:
        return Decision(
            action="stop",
            kind="escalation",
            **base,
            reason=(
                f"{alarm.reason}; {len(in_window)} rollbacks already within "
                f"{cfg.escalation_window_steps} steps (spikes at {sorted(in_window)}): stopping for "
                "a human to decide"
            ),
        )
    remedy, skip, scale = _remedy(alarm, kind, past_rollbacks, cfg)
    target = choose_rollback_target(checkpoints, alarm.onset_step, cfg)
    if target is None:
        return Decision(
            action="stop",
            kind="no_healthy_checkpoint",
            **base,
            reason=(
                f"{alarm.reason}; no healthy checkpoint before step "
                f"{alarm.onset_step - cfg.rollback_margin_steps}: stopping for a human to decide"
            ),
        )
    end = max(window_end or 0, alarm.step + 1)
    window = (alarm.onset_step, end) if skip else None
    tokens = None
    if window and tokens_per_step:
        tokens = ((window[0] - 1) * tokens_per_step, (window[1] - 1) * tokens_per_step)
    fix = " + ".join(
        p for p, on in (("skip the window", skip), (f"LR ×{cfg.lr_factor}", scale)) if on
    )
    rolled: _SpikeFields = {
        **base,
        "lr_scale": run.lr_scale * cfg.lr_factor if scale else run.lr_scale,
        "skip_windows": run.skip_windows + ((window,) if window else ()),
    }
    return Decision(
        **rolled,
        action="rollback",
        kind=remedy,
        reason=f"{alarm.reason}; {remedy} → roll back to {target.key} and {fix}",
        checkpoint_key=target.key,
        checkpoint_path=target.path,
        checkpoint_step=target.step,
        skip_window=window,
        skip_tokens=tokens,
        new_branch=next_branch(run.branch),
    )


def _remedy(
    alarm: Alarm, kind: str | None, past_rollbacks: Sequence[int], cfg: PolicyConfig
) -> tuple[str, bool, bool]:
    """(the spike's kind, skip its data?, scale the LR?): a non-finite loss or a spike where a
    rollback already was gets both; a bad batch is skipped; a slow rise gets a lower LR."""
    repeated = any(abs(s - alarm.step) <= cfg.repeat_window_steps for s in past_rollbacks)
    if alarm.kind == NONFINITE or repeated:
        return ("nonfinite" if alarm.kind == NONFINITE else "repeated"), True, True
    if kind == "bad_batch":
        return "bad_batch", True, False
    if kind == "slow":
        return "slow", False, True
    raise ValueError(f"spike at step {alarm.step} is not classified yet (kind={kind!r})")


def decide_trend(
    reason: str | None,
    *,
    step: int,
    run: RunSettings,
    last_reduction_step: int | None,
    cooldown_steps: int,
    cfg: PolicyConfig,
) -> Decision:
    """Plateau or grad-norm creep → reduce the LR from the latest checkpoint, same branch.

    No second reduction within ``cooldown_steps`` of the last one (the new LR needs time)."""
    if reason is None:
        return Decision(
            action="none", reason="no plateau or grad-norm creep", branch=run.branch, step=step
        )
    if last_reduction_step is not None and step - last_reduction_step < cooldown_steps:
        return Decision(
            action="none",
            branch=run.branch,
            step=step,
            reason=(
                f"{reason}; within the {cooldown_steps}-step cooldown after the LR reduction at "
                f"step {last_reduction_step}"
            ),
        )
    return Decision(
        action="reduce_lr",
        kind="plateau" if reason.startswith("plateau") else "grad_creep",
        reason=f"{reason} → LR ×{cfg.lr_factor} from the latest checkpoint",
        branch=run.branch,
        step=step,
        lr_scale=run.lr_scale * cfg.lr_factor,
        skip_windows=run.skip_windows,
    )


def decide_crash_resume(
    *, run: RunSettings, attempt: int, max_resumes: int, latest_step: int | None, error: str
) -> Decision:
    """A crashed training run → resume its branch from the latest checkpoint, within budget.

    ``attempt`` counts consecutive crash-resumes without a new checkpoint (the caller resets it
    to 1 when the crashed run committed one); past ``max_resumes`` the campaign stops."""
    if attempt > max_resumes:
        return Decision(
            action="stop",
            kind="crash_budget",
            branch=run.branch,
            reason=(
                f"training crashed {attempt} times in a row without a new checkpoint "
                f"(budget {max_resumes}); last error: {error[:300]}"
            ),
        )
    where = f"step {latest_step}" if latest_step is not None else "the start (no checkpoint yet)"
    return Decision(
        action="resume",
        kind="crash",
        branch=run.branch,
        lr_scale=run.lr_scale,
        skip_windows=run.skip_windows,
        checkpoint_step=latest_step,
        reason=f"crash-resume {attempt}/{max_resumes} of {run.branch!r} from {where}: "
        f"{error[:300]}",
    )


def decision_metadata(decision: Decision) -> dict[str, Any]:
    """Flat metadata for an AssetObservation (None values dropped)."""
    return {k: v for k, v in json.loads(decision.to_json()).items() if v is not None}
