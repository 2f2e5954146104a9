"""The campaign's loss curve with every recovery decision marked on it, as a PNG.

    from pretrain.recovery.loss_chart import loss_curve_png
    blob = loss_curve_png(
        {"b00": rows_b00, "b01": rows_b01},      # MetricRows per branch, in campaign order
        [rollback_decision, reduce_lr_decision],  # pretrain.recovery.policy.Decision
    )

One line per branch (a rollback starts a new branch, so the abandoned tail stays visible next
to the path training took). Markers, one legend entry each:

- spike: a red ✕ at the spike step on the branch that spiked (non-finite losses are drawn
  as ✕ at the top edge, labelled NaN/inf);
- rollback: a dotted vertical line at the checkpoint step it returned to, with an arrow from
  the spike back to it, and the skipped step window shaded;
- LR reduction: an orange ▼ at the step, annotated with the new LR scale;
- crash resume: a grey dashed line at the checkpoint step the resumed run started from;
- stop: a thick red line at the step where the campaign stopped for a human.

Same inputs → same bytes (:func:`pretrain.charts.figure_png`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pretrain.charts import figure_png, pyplot
from pretrain.recovery.policy import Decision
from pretrain.recovery.series import MetricRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def loss_curve_png(
    branches: Mapping[str, Sequence[MetricRow]],
    decisions: Sequence[Decision] = (),
    title: str = "training loss",
) -> bytes:
    """Loss against step per branch with the decisions marked; PNG bytes."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.8), dpi=80)
    finite_losses = []
    for branch, rows in branches.items():
        pts = [(r.step, r.loss) for r in rows if r.loss is not None and math.isfinite(r.loss)]
        finite_losses += [loss for _, loss in pts]
        if pts:
            ax.plot(*zip(*pts, strict=True), linewidth=1.0, label=f"branch {branch}")
    top = max(finite_losses, default=1.0) * 1.05
    bad = [r.step for rows in branches.values() for r in rows if not r.finite]
    if bad:
        ax.scatter(bad, [top] * len(bad), marker="x", color="darkred", label="NaN/inf loss")
    losses = {(b, r.step): r.loss for b, rows in branches.items() for r in rows}
    for decision in decisions:
        _mark(ax, decision, losses, top)
    ax.set_xlabel("step")
    ax.set_ylabel("train loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))  # one legend entry per kind of marker
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper right")
    fig.tight_layout()
    return figure_png(fig)


def _mark(
    ax: Axes, d: Decision, losses: Mapping[tuple[str, int], float | None], top: float
) -> None:
    """Draw one decision on ``ax``."""
    if d.action == "rollback" and d.spike_step is not None:
        loss = losses.get((d.branch, d.spike_step))
        y = loss if loss is not None and math.isfinite(loss) else top
        ax.scatter([d.spike_step], [y], marker="x", s=60, color="red", zorder=5, label="spike")
        back = d.checkpoint_step if d.checkpoint_step is not None else _step(d.checkpoint_key)
        if back is not None:
            ax.axvline(back, linestyle=":", color="purple", label="rollback target")
            ax.annotate(
                f"→ {d.new_branch}",
                xy=(back, y),
                xytext=(d.spike_step, y),
                arrowprops={"arrowstyle": "->", "color": "purple"},
                fontsize=7,
                color="purple",
            )
        if d.skip_window is not None:
            ax.axvspan(*d.skip_window, color="grey", alpha=0.25, label="skipped steps")
    elif d.action == "reduce_lr" and d.step is not None:
        loss = losses.get((d.branch, d.step))
        y = loss if loss is not None and math.isfinite(loss) else top
        ax.scatter([d.step], [y], marker="v", s=50, color="orange", zorder=5, label="LR reduced")
        ax.annotate(f"lr×{d.lr_scale:.3g}", (d.step, y), fontsize=7, color="darkorange")
    elif d.action == "resume":
        at = d.checkpoint_step if d.checkpoint_step is not None else d.step
        if at is not None:
            ax.axvline(at, linestyle="--", color="grey", label="crash resume")
    elif d.action == "stop" and d.step is not None:
        ax.axvline(d.step, linewidth=2.5, color="red", label="STOPPED")


def _step(checkpoint_key: str | None) -> int | None:
    """``b01-s000000020`` → 20 (the ``checkpoints`` partition key format)."""
    if not checkpoint_key or "-s" not in checkpoint_key:
        return None
    tail = checkpoint_key.rsplit("-s", 1)[1]
    return int(tail) if tail.isdigit() else None
