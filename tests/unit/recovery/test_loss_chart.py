"""The campaign loss curve: branches, spike / rollback / LR / crash / stop markers, stable PNG."""

import io
import math

from PIL import Image

from pretrain.recovery.loss_chart import loss_curve_png
from pretrain.recovery.policy import Decision
from pretrain.recovery.series import MetricRow


def rows(first: int, last: int, spike_at: int | None = None) -> list[MetricRow]:
    out = []
    for step in range(first, last + 1):
        loss = 4.0 * math.exp(-step / 60) + 2.0
        if step == spike_at:
            loss *= 3
        out.append(MetricRow(step=step, loss=loss, grad_norm=1.0))
    return out


DECISIONS = [
    Decision(
        action="rollback",
        reason="spike",
        branch="b00",
        spike_step=70,
        checkpoint_key="b00-s000000050",
        checkpoint_step=50,
        skip_window=(69, 71),
        new_branch="b01",
    ),
    Decision(action="reduce_lr", reason="plateau", branch="b01", step=120, lr_scale=0.8),
    Decision(action="resume", reason="crash", branch="b01", checkpoint_step=140),
    Decision(action="stop", reason="budget", branch="b01", step=180),
]


def test_loss_curve_marks_every_decision_and_is_byte_stable() -> None:
    branches = {"b00": rows(1, 75, spike_at=70), "b01": rows(51, 180)}
    branches["b01"].append(MetricRow(step=181, loss=float("nan"), grad_norm=float("nan")))
    blob = loss_curve_png(branches, DECISIONS)
    image = Image.open(io.BytesIO(blob))
    assert image.format == "PNG" and image.size == (720, 304)
    assert loss_curve_png(branches, DECISIONS) == blob  # same inputs, same bytes
    plain = Image.open(io.BytesIO(loss_curve_png(branches, []))).convert("RGB")
    marked = image.convert("RGB")
    red = sum(1 for r, g, b in marked.get_flattened_data() if r > 200 and g < 60 and b < 60)
    red_plain = sum(1 for r, g, b in plain.get_flattened_data() if r > 200 and g < 60 and b < 60)
    assert red > red_plain + 100  # the spike ✕ and the STOP line are drawn in red


def test_loss_curve_with_no_rows_still_renders() -> None:
    blob = loss_curve_png({"b00": []}, [])
    assert Image.open(io.BytesIO(blob)).format == "PNG"
