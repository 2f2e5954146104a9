"""Pure detectors over training metric rows: loss spikes, non-finite values, grad-norm alarms,
plateau and grad-norm creep. No IO; every threshold lives in :class:`DetectorConfig`.

    cfg = DetectorConfig()                                  # reference defaults, documented below
    spike = find_spike(rows, cfg, after_step=120)           # first alarm after step 120, or None
    kind = classify_recovery(spike, rows, cfg)              # "bad_batch" | "slow" | None (wait)

A spike at step ``S`` is a loss that exceeds its rolling baseline — the mean of the previous
``baseline_steps`` finite losses — by more than ``spike_fraction``, or exceeds the mean of the
previous ``sigma_steps`` losses by more than ``sigma_k`` standard deviations; the relative rule also
needs a rise of at least ``min_spike_delta`` nats. Its *onset* is the
first step of the run of losses above ``baseline × (1 + onset_fraction)`` that ends at ``S``.
NaN/inf in loss or grad_norm is an immediate alarm; ``grad_norm > grad_stop`` is a stop alarm,
``grad_norm > grad_warn`` a warning. Skipped steps (no loss) are ignored.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.recovery.series import MetricRow
from pretrain.settings import check_types

SPIKE, NONFINITE, GRAD_STOP, GRAD_WARN = (
    "loss_spike",
    "nonfinite",
    "grad_norm_stop",
    "grad_norm_warn",
)


@dataclass(frozen=True, kw_only=True)
class DetectorConfig:
    """Thresholds of the detectors (defaults are the reference values of the recovery design).

    ``baseline_steps``/``spike_fraction``: loss > mean of the previous 100 losses × 1.20.
    ``sigma_steps``/``sigma_k``: loss > mean + 6σ of the previous 128 losses.
    ``min_spike_delta``: the relative rule also needs the loss to rise at least 0.25 nats above
    its baseline. A relative rule means nothing near zero loss: at a loss of 0.07 (a small model
    memorizing) step-to-step noise alone is +50 %; at pretraining losses (2–4 nats) a 20 % rise
    is 0.4–0.8 nats, above this floor. The σ rule needs no floor: it scales with the noise.
    ``min_history``: no spike is called before this many finite losses (early training is noisy).
    ``onset_fraction``: the onset walks back while loss > baseline × 1.05.
    ``recovery_fraction``/``bad_batch_steps``: back under baseline × 1.05 within 2 steps after the
    spike = a bad batch; otherwise a learning-rate problem.
    ``grad_warn``/``grad_stop``: grad_norm thresholds (10 warns, 100 stops).
    ``plateau_steps``/``plateau_min_improvement``: the mean loss of the last 200 steps improved by
    less than 1% over the 200 before = plateau.
    ``creep_steps``/``creep_ratio``: the mean grad_norm of the last 100 steps is more than 1.5× the
    100 before = creep.
    """

    baseline_steps: int = 100
    spike_fraction: float = 0.20
    sigma_steps: int = 128
    sigma_k: float = 6.0
    min_spike_delta: float = 0.25
    min_history: int = 20
    onset_fraction: float = 0.05
    recovery_fraction: float = 0.05
    bad_batch_steps: int = 2
    grad_warn: float = 10.0
    grad_stop: float = 100.0
    plateau_steps: int = 200
    plateau_min_improvement: float = 0.01
    creep_steps: int = 100
    creep_ratio: float = 1.5

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("baseline_steps", "sigma_steps", "min_history", "bad_batch_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"detector.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("plateau_steps", "creep_steps"):
            if getattr(self, name) < 2:
                raise ConfigError(f"detector.{name} must be >= 2 steps, got {getattr(self, name)}")
        if self.min_spike_delta < 0:
            raise ConfigError(f"detector.min_spike_delta must be >= 0, got {self.min_spike_delta}")
        if self.spike_fraction <= 0 or self.sigma_k <= 0:
            raise ConfigError("detector.spike_fraction and sigma_k must be > 0 (e.g. 0.2 and 6)")
        if not 0 <= self.onset_fraction <= self.spike_fraction:
            raise ConfigError(
                f"detector.onset_fraction={self.onset_fraction} must be in [0, spike_fraction="
                f"{self.spike_fraction}] (the onset is where the loss started to rise)"
            )
        if not 0 <= self.recovery_fraction < self.spike_fraction:
            raise ConfigError("detector.recovery_fraction must be in [0, spike_fraction)")
        if not 0 < self.grad_warn <= self.grad_stop:
            raise ConfigError(
                f"detector.grad_warn={self.grad_warn} must be > 0 and <= grad_stop={self.grad_stop}"
            )
        if self.plateau_min_improvement < 0 or self.creep_ratio <= 1:
            raise ConfigError("detector.plateau_min_improvement must be >= 0, creep_ratio > 1")

    @property
    def history_steps(self) -> int:
        """How many past rows a streaming caller must keep for the spike detector."""
        return max(self.baseline_steps, self.sigma_steps)


@dataclass(frozen=True, kw_only=True)
class Alarm:
    """One finding: ``kind`` is one of SPIKE, NONFINITE, GRAD_STOP, GRAD_WARN."""

    kind: str
    step: int
    onset_step: int
    value: float
    baseline: float | None
    reason: str


def find_spike(rows: Sequence[MetricRow], cfg: DetectorConfig, after_step: int = 0) -> Alarm | None:
    """The first NONFINITE, GRAD_STOP or SPIKE alarm at a step > ``after_step`` (rows sorted)."""
    history: list[MetricRow] = []
    for row in rows:
        if row.skipped or row.loss is None:
            continue
        if row.step > after_step:
            alarm = _check_row(row, history, cfg)
            if alarm is not None:
                return alarm
        if row.finite:
            history.append(row)
    return None


def grad_warnings(rows: Sequence[MetricRow], cfg: DetectorConfig, after_step: int = 0) -> list[int]:
    """Steps after ``after_step`` whose grad_norm is above ``grad_warn`` (but finite)."""
    return [
        r.step
        for r in rows
        if r.step > after_step
        and r.grad_norm is not None
        and math.isfinite(r.grad_norm)
        and r.grad_norm > cfg.grad_warn
    ]


def _check_row(row: MetricRow, history: list[MetricRow], cfg: DetectorConfig) -> Alarm | None:
    assert row.loss is not None
    if not row.finite:
        # not finite with a finite loss means the grad_norm is the non-finite one
        bad = row.loss if not math.isfinite(row.loss) or row.grad_norm is None else row.grad_norm
        return Alarm(
            kind=NONFINITE,
            step=row.step,
            onset_step=row.step,
            value=float(bad),
            baseline=None,
            reason=f"non-finite loss/grad_norm ({bad}) at step {row.step}",
        )
    if row.grad_norm is not None and row.grad_norm > cfg.grad_stop:
        return Alarm(
            kind=GRAD_STOP,
            step=row.step,
            onset_step=row.step,
            value=row.grad_norm,
            baseline=None,
            reason=f"grad_norm {row.grad_norm:.4g} > grad_stop "
            f"{cfg.grad_stop:g} at step {row.step}",
        )
    if len(history) < cfg.min_history:
        return None
    losses = [r.loss for r in history if r.loss is not None]  # find_spike keeps only trained rows
    baseline = statistics.fmean(losses[-cfg.baseline_steps :])
    window = losses[-cfg.sigma_steps :]
    sigma = statistics.pstdev(window) if len(window) > 1 else 0.0
    mean = statistics.fmean(window)
    relative = (
        row.loss > baseline * (1 + cfg.spike_fraction)
        and row.loss - baseline >= cfg.min_spike_delta
    )
    by_sigma = sigma > 0 and row.loss > mean + cfg.sigma_k * sigma
    if not (relative or by_sigma):
        return None
    why = (
        f"> {1 + cfg.spike_fraction:.2f}× baseline {baseline:.4g}"
        if relative
        else f"> mean {mean:.4g} + {cfg.sigma_k:g}σ ({sigma:.3g})"
    )
    return Alarm(
        kind=SPIKE,
        step=row.step,
        onset_step=_onset(row, history, baseline, cfg),
        value=row.loss,
        baseline=baseline,
        reason=f"loss {row.loss:.4g} at step {row.step} {why}",
    )


def _onset(row: MetricRow, history: list[MetricRow], baseline: float, cfg: DetectorConfig) -> int:
    """Walk back from the spike while the loss stays above baseline × (1 + onset_fraction)."""
    onset = row.step
    limit = baseline * (1 + cfg.onset_fraction)
    for past in reversed(history[-cfg.baseline_steps :]):
        if past.loss is None or past.loss <= limit:
            break
        onset = past.step
    return onset


def classify_recovery(alarm: Alarm, rows: Sequence[MetricRow], cfg: DetectorConfig) -> str | None:
    """``"bad_batch"`` if the loss is back near its baseline within ``bad_batch_steps`` trained
    steps after the spike, ``"slow"`` if it is not, None while those steps are not logged yet."""
    if recovered_at(alarm, rows, cfg) is not None:
        return "bad_batch"
    after = [r for r in rows if r.step > alarm.step and not r.skipped and r.loss is not None]
    return "slow" if len(after) >= cfg.bad_batch_steps else None


def recovered_at(alarm: Alarm, rows: Sequence[MetricRow], cfg: DetectorConfig) -> int | None:
    """The first trained step within ``bad_batch_steps`` after the spike whose loss is back under
    baseline × (1 + ``recovery_fraction``), or None. The steps between the spike and it are the
    rest of the bad data (a poisoned range two batches long spikes on both)."""
    if alarm.baseline is None:
        raise ValueError(f"only loss spikes are classified, not {alarm.kind}")
    after = [r for r in rows if r.step > alarm.step and not r.skipped and r.loss is not None]
    limit = alarm.baseline * (1 + cfg.recovery_fraction)
    for row in after[: cfg.bad_batch_steps]:
        if row.finite and row.loss is not None and row.loss <= limit:
            return row.step
    return None


def detect_plateau(rows: Sequence[MetricRow], cfg: DetectorConfig) -> str | None:
    """A reason string when the loss stopped improving over the last two windows, else None."""
    losses = [r.loss for r in rows if not r.skipped and r.loss is not None and r.finite]
    n = cfg.plateau_steps
    if len(losses) < 2 * n:
        return None
    before, recent = statistics.fmean(losses[-2 * n : -n]), statistics.fmean(losses[-n:])
    if recent < before * (1 - cfg.plateau_min_improvement):
        return None
    return (
        f"plateau: mean loss {recent:.4g} over the last {n} steps vs {before:.4g} over the "
        f"{n} before (< {cfg.plateau_min_improvement:.1%} better)"
    )


def detect_grad_creep(rows: Sequence[MetricRow], cfg: DetectorConfig) -> str | None:
    """A reason string when grad_norm's recent mean grew by more than ``creep_ratio``, else None."""
    norms = [r.grad_norm for r in rows if r.grad_norm is not None and r.finite and not r.skipped]
    n = cfg.creep_steps
    if len(norms) < 2 * n:
        return None
    before, recent = statistics.fmean(norms[-2 * n : -n]), statistics.fmean(norms[-n:])
    if recent <= before * cfg.creep_ratio:
        return None
    return (
        f"grad-norm creep: mean grad_norm {recent:.4g} over the last {n} steps vs "
        f"{before:.4g} over the {n} before (> {cfg.creep_ratio:g}×)"
    )
