"""The metric rows the detectors read, built from W&B history (offline file or API).

The trainer logs ``train/<name>`` per step (:mod:`pretrain.train.metrics`); W&B adds ``_step``.
:func:`metric_rows` turns those history dicts into :class:`MetricRow` s — one per step, the
last row winning when a crash-resumed branch logs a step twice.

    rows = metric_rows(history)          # [MetricRow(step=1, loss=2.9, grad_norm=1.0, ...), ...]

The run id the trainer uses for a branch is :func:`pretrain.run_files.wandb_run_id`, so a
reader can find a branch's W&B run without the trainer's config.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pretrain.errors import DataError

PREFIX = "train/"


@dataclass(frozen=True, kw_only=True)
class MetricRow:
    """One training step as logged. ``loss`` is None for a skipped step (no forward pass)."""

    step: int
    loss: float | None = None
    grad_norm: float | None = None
    lr: float | None = None
    tokens_seen: int | None = None
    skipped: bool = False

    @property
    def finite(self) -> bool:
        """False when loss or grad_norm is NaN/±inf (a skipped step counts as finite)."""
        values = [v for v in (self.loss, self.grad_norm) if v is not None]
        return all(math.isfinite(v) for v in values)

    def to_list(self) -> list[Any]:
        """Compact JSON form for sensor cursors: ``[step, loss, grad_norm, lr, tokens, skipped]``."""
        return [
            self.step,
            _json_float(self.loss),
            _json_float(self.grad_norm),
            self.lr,
            self.tokens_seen,
            int(self.skipped),
        ]

    @classmethod
    def from_list(cls, item: list[Any]) -> MetricRow:
        step, loss, grad_norm, lr, tokens_seen, skipped = item
        return cls(
            step=int(step),
            loss=_from_json_float(loss),
            grad_norm=_from_json_float(grad_norm),
            lr=lr,
            tokens_seen=tokens_seen,
            skipped=bool(skipped),
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def metric_rows(history: Iterable[Mapping[str, Any]], prefix: str = PREFIX) -> list[MetricRow]:
    """W&B history rows → :class:`MetricRow` s sorted by step, the last row per step winning.

    Rows without ``_step`` or without any ``<prefix>`` key (e.g. eval rows) are ignored.
    """
    by_step: dict[int, MetricRow] = {}
    for row in history:
        if "_step" not in row or not any(str(k).startswith(prefix) for k in row):
            continue
        step = row["_step"]
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise DataError(f"history row has a non-integer _step {step!r}: {dict(row)}")
        by_step[step] = MetricRow(
            step=step,
            loss=_number(row.get(prefix + "loss")),
            grad_norm=_number(row.get(prefix + "grad_norm")),
            lr=_number(row.get(prefix + "lr")),
            tokens_seen=_integer(row.get(prefix + "tokens_seen")),
            skipped=bool(row.get(prefix + "skipped", False)),
        )
    return [by_step[s] for s in sorted(by_step)]


def tokens_per_step(rows: Iterable[MetricRow]) -> int | None:
    """Tokens trained per step, from consecutive trained steps' ``tokens_seen`` (None if unknown)."""
    trained = [(r.step, r.tokens_seen) for r in rows if not r.skipped and r.tokens_seen is not None]
    deltas = [
        (b_tokens - a_tokens) // (b_step - a_step)
        for (a_step, a_tokens), (b_step, b_tokens) in zip(trained, trained[1:], strict=False)
        if b_step > a_step and b_tokens > a_tokens
    ]
    return sorted(deltas)[len(deltas) // 2] if deltas else None


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    raise DataError(f"metric value {value!r} is not a number")


def _integer(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _json_float(value: float | None) -> float | str | None:
    """JSON has no NaN/inf; cursors keep them as strings."""
    if value is None or math.isfinite(value):
        return value
    return str(value)


def _from_json_float(value: float | str | None) -> float | None:
    return float(value) if isinstance(value, str) else value
