"""Streaming state of the recovery loop: the pure step a sensor takes on each tick.

A sensor reads new metric rows since its cursor, then calls::

    result = observe_spikes(state, new_rows, checkpoints, run, detector_cfg, policy_cfg)
    result.decision      # Decision: none / warn / rollback / stop
    result.labels        # {checkpoint key: "healthy" | "suspect"} decided on this tick
    result.state.to_json()   # the next cursor

:class:`MonitorState` is everything the loop must remember between ticks, as JSON: the metrics
cursor, a bounded tail of rows (the detectors' rolling windows), the last step scanned, a spike
waiting for its recovery to be classified, the alarm ranges that make checkpoints suspect, and
the spike steps of past rollbacks (the escalation budget). When training moves to another branch
(a rollback or an operator's resume), :meth:`MonitorState.rebase` keeps the rows up to the resume
step — the same history on the new branch — and forgets the rest.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pretrain.checkpoint.health import HEALTHY, SUSPECT, CheckpointInfo
from pretrain.recovery.detectors import (
    SPIKE,
    Alarm,
    DetectorConfig,
    classify_recovery,
    detect_grad_creep,
    detect_plateau,
    find_spike,
    grad_warnings,
    recovered_at,
)
from pretrain.recovery.policy import (
    Decision,
    PolicyConfig,
    RunSettings,
    decide_spike,
    decide_trend,
    label_checkpoint,
)
from pretrain.recovery.series import MetricRow, tokens_per_step

MAX_FLAGGED = 32
MAX_REPORTED = 256


@dataclass(frozen=True, kw_only=True)
class MonitorState:
    run_id: str | None = None
    branch: str | None = None
    awaiting: str | None = None
    metrics_cursor: Any = None
    tail: tuple[MetricRow, ...] = ()
    first_step: int | None = None
    scanned_through: int = 0
    pending: Alarm | None = None
    flagged: tuple[tuple[int, int], ...] = ()
    rollbacks: tuple[int, ...] = ()
    last_reduction_step: int | None = None
    stopped: Decision | None = field(default=None)
    reported: tuple[str, ...] = ()  # checkpoint keys whose health label was already reported

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["tail"] = [row.to_list() for row in self.tail]
        data["stopped"] = self.stopped.to_json() if self.stopped else None
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> MonitorState:
        if not text:
            return cls()
        data = json.loads(text)
        data["tail"] = tuple(MetricRow.from_list(r) for r in data["tail"])
        data["pending"] = Alarm(**data["pending"]) if data.get("pending") else None
        data["flagged"] = tuple(tuple(f) for f in data["flagged"])
        data["rollbacks"] = tuple(data["rollbacks"])
        data["reported"] = tuple(data.get("reported", ()))
        data["stopped"] = Decision.from_json(data["stopped"]) if data.get("stopped") else None
        return cls(**data)

    def follow(self, run_id: str, branch: str, resume_step: int | None) -> MonitorState:
        """Watch training run ``run_id``: a new run clears a finished decision (``awaiting``,
        ``stopped``); a new branch also rebases the history onto its resume step."""
        if run_id == self.run_id:
            return self
        state = dataclasses.replace(self, run_id=run_id, awaiting=None, stopped=None)
        return state if branch == self.branch else state.rebase(branch, resume_step)

    @property
    def idle_reason(self) -> str | None:
        """Why this monitor must not act until another training run starts, or None."""
        if self.stopped is not None:
            return f"campaign stopped at step {self.stopped.step}: {self.stopped.reason}"
        if self.awaiting is not None:
            return f"waiting for the resumed run on branch {self.awaiting!r} to start"
        return None

    def rebase(self, branch: str, resume_step: int | None) -> MonitorState:
        """Follow training to ``branch``, resumed from ``resume_step`` (None: from scratch)."""
        keep = resume_step or 0
        return dataclasses.replace(
            self,
            branch=branch,
            metrics_cursor=None,
            pending=None,
            tail=tuple(r for r in self.tail if r.step <= keep),
            scanned_through=keep,
            first_step=self.first_step if keep else None,
            flagged=tuple(f for f in self.flagged if f[0] <= keep),
        )

    def merged(self, rows: Sequence[MetricRow]) -> tuple[MetricRow, ...]:
        """The tail and ``rows`` in step order (a re-logged step replaces the old row)."""
        by_step = {r.step: r for r in self.tail}
        by_step.update({r.step: r for r in rows})
        return tuple(by_step[s] for s in sorted(by_step))

    def add_rows(self, rows: Sequence[MetricRow], keep: int) -> MonitorState:
        """Merge new rows into the tail; keep the last ``keep``."""
        return self.with_tail(self.merged(rows), keep)

    def with_tail(self, window: Sequence[MetricRow], keep: int) -> MonitorState:
        """Remember the last ``keep`` rows of ``window`` (the first step seen stays)."""
        first = (
            self.first_step if self.first_step is not None else (window[0].step if window else None)
        )
        tail = tuple(window)[-keep:]
        return dataclasses.replace(self, tail=tail, first_step=first)


def unreported_labels(
    state: MonitorState, labels: dict[str, str]
) -> tuple[MonitorState, dict[str, str]]:
    """The final labels (healthy/suspect) not reported before, and the state remembering them:
    each checkpoint's health check is emitted once, not on every tick."""
    new = {k: v for k, v in sorted(labels.items()) if k not in state.reported}
    reported = (state.reported + tuple(new))[-MAX_REPORTED:]
    return dataclasses.replace(state, reported=reported), new


@dataclass(frozen=True, kw_only=True)
class MonitorResult:
    state: MonitorState
    decision: Decision
    labels: dict[str, str]


def observe_spikes(
    state: MonitorState,
    rows: Sequence[MetricRow],
    checkpoints: Sequence[CheckpointInfo],
    run: RunSettings,
    detector: DetectorConfig,
    policy: PolicyConfig,
) -> MonitorResult:
    """One tick of the loss-spike monitor (pure). ``checkpoints`` carry on-disk labels; labels
    the monitor can judge itself replace them."""
    keep = detector.history_steps + policy.health_window_steps + 2 * detector.bad_batch_steps + 8
    # every row of this tick is scanned, however many arrived (a late first tick, a restarted
    # daemon); only the cursor's tail is bounded
    tail = state.merged(rows)
    state = state.with_tail(tail, keep)
    alarm = state.pending or find_spike(tail, detector, after_step=state.scanned_through)
    decision = Decision(action="none", reason="no alarm", branch=run.branch)
    scanned = tail[-1].step if tail else state.scanned_through
    if alarm is not None:
        flagged = (
            state.flagged
            if alarm == state.pending
            else (state.flagged + ((alarm.onset_step, alarm.step),))[-MAX_FLAGGED:]
        )
        state = dataclasses.replace(state, flagged=flagged)
        kind = classify_recovery(alarm, tail, detector) if alarm.kind == SPIKE else None
        if alarm.kind == SPIKE and kind is None:  # wait for the steps after the spike
            state = dataclasses.replace(state, pending=alarm, scanned_through=alarm.step)
            return MonitorResult(
                state=state,
                labels=_labels(state, checkpoints, policy)[1],
                decision=Decision(
                    action="none",
                    branch=run.branch,
                    step=alarm.step,
                    reason=f"{alarm.reason}; waiting for recovery",
                ),
            )
        # decided: the history up to the alarm is what a resumed branch continues from
        state = state.with_tail([r for r in tail if r.step <= alarm.step], keep)
        state = dataclasses.replace(state, pending=None, scanned_through=alarm.step)
        labelled, labels = _labels(state, checkpoints, policy)
        decision = decide_spike(
            alarm,
            kind=kind,
            checkpoints=labelled,
            run=run,
            past_rollbacks=state.rollbacks,
            tokens_per_step=tokens_per_step(tail),
            cfg=policy,
            window_end=recovered_at(alarm, tail, detector) if kind == "bad_batch" else None,
        )
        if decision.action == "rollback":
            state = dataclasses.replace(
                state, rollbacks=state.rollbacks + (alarm.step,), awaiting=decision.new_branch
            )
        elif decision.action == "stop":
            state = dataclasses.replace(state, stopped=decision)
        return MonitorResult(state=state, decision=decision, labels=labels)
    warned = grad_warnings(tail, detector, after_step=state.scanned_through)
    state = dataclasses.replace(state, scanned_through=max(scanned, state.scanned_through))
    if warned:
        decision = Decision(
            action="warn",
            kind="grad_norm_warn",
            branch=run.branch,
            step=warned[-1],
            reason=f"grad_norm > {detector.grad_warn:g} at steps {warned[:20]}",
        )
    return MonitorResult(
        state=state, decision=decision, labels=_labels(state, checkpoints, policy)[1]
    )


def _labels(
    state: MonitorState, checkpoints: Sequence[CheckpointInfo], policy: PolicyConfig
) -> tuple[list[CheckpointInfo], dict[str, str]]:
    """Checkpoints with the monitor's labels applied, and the labels it decided (healthy/suspect)."""
    labelled, decided = [], {}
    for ckpt in checkpoints:
        label = None
        if state.first_step is not None:
            label = label_checkpoint(
                ckpt.step,
                scanned_through=state.scanned_through,
                first_step=state.first_step,
                flagged=state.flagged,
                cfg=policy,
            )
        if label in (HEALTHY, SUSPECT):
            decided[ckpt.key] = label
        labelled.append(
            ckpt if label not in (HEALTHY, SUSPECT) else dataclasses.replace(ckpt, label=label)
        )
    return labelled, decided


def observe_trends(
    state: MonitorState,
    rows: Sequence[MetricRow],
    run: RunSettings,
    detector: DetectorConfig,
    policy: PolicyConfig,
) -> MonitorResult:
    """One tick of the LR monitor (pure): plateau or grad-norm creep → reduce_lr decision."""
    keep = 2 * max(detector.plateau_steps, detector.creep_steps)
    state = state.add_rows(rows, keep)
    if not state.tail:
        return MonitorResult(
            state=state,
            labels={},
            decision=Decision(action="none", reason="no rows yet", branch=run.branch),
        )
    step = state.tail[-1].step
    reason = detect_plateau(state.tail, detector) or detect_grad_creep(state.tail, detector)
    decision = decide_trend(
        reason,
        step=step,
        run=run,
        last_reduction_step=state.last_reduction_step,
        cooldown_steps=keep,
        cfg=policy,
    )
    if decision.action == "reduce_lr":
        state = dataclasses.replace(state, last_reduction_step=step, awaiting=run.branch)
    return MonitorResult(
        state=dataclasses.replace(state, scanned_through=step), decision=decision, labels={}
    )
