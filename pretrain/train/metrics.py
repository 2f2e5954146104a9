"""Per-step training metrics: W&B (offline by default) and a local ``metrics.jsonl``.

Rank 0 owns the sink; other ranks get :class:`NullMetrics`.

    metrics = MetricsLogger(cfg)            # wandb.init(mode="offline", ...) unless disabled
    metrics.log({"loss": 2.31, "lr": 3e-4, ...}, step=17)
    metrics.close()

Each row of ``metrics.jsonl`` is ``{"step", "loss", "grad_norm", "lr", "tokens_per_s",
"step_time_s", "data_wait_s", "mfu", "memory_gb", "tokens_seen", "time"}`` plus ``z_loss`` /
``val_loss`` when enabled (or ``{"step", "skipped": true, ...}`` for a step inside a skip
window); ``time`` is the wall clock when the row was written (the JSONL file only). The file is appended to: after a crash-resume a step can appear
twice; readers keep the last row per step. W&B offline files land in
``<wandb_dir>/wandb/offline-run-*/run-<id>.wandb`` and are flushed every second
(``x_transaction_log_flush_interval``) so the loss-spike sensor sees them quickly.

MFU = flops_per_token × tokens/s ÷ (peak FLOP/s per device × devices); the peak comes from
``metrics.peak_flops_per_device`` or the table :data:`PEAK_FLOPS` (bf16 dense; CPU: a nominal
1 TFLOP/s so the number is comparable between CPU runs, not meaningful in absolute terms).
"""

from __future__ import annotations

import json
import math
import resource
import time
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import torch

from pretrain.hardware import PEAK_BF16_FLOPS
from pretrain.train.config import TrainConfig

PEAK_FLOPS = PEAK_BF16_FLOPS  # one table, shared with compute planning (pretrain.hardware)


def peak_flops_per_device(device: torch.device, override: float | None = None) -> float:
    if override is not None:
        return override
    if device.type != "cuda":
        return PEAK_FLOPS["cpu"]
    name = torch.cuda.get_device_name(device).lower()
    for key in ("h200", "h100", "a100"):
        if key in name:
            return PEAK_FLOPS[key]
    return PEAK_FLOPS["a100"]  # unknown GPU: a conservative, documented default


def memory_gb(device: torch.device) -> float:
    """Peak allocated accelerator memory, or the process's peak RSS on CPU (GiB)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float, world_size: int) -> float:
    return flops_per_token * tokens_per_s / (peak_flops * world_size)


class Metrics(Protocol):
    def log(self, metrics: dict[str, Any], step: int) -> None: ...
    def close(self) -> None: ...


class NullMetrics:
    def log(self, metrics: dict[str, Any], step: int) -> None:
        pass

    def close(self) -> None:
        pass


class MetricsLogger:
    """JSONL + W&B sink (W&B imported lazily; ``wandb_mode="disabled"`` skips it entirely)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.path = cfg.metrics_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", buffering=1)  # line-buffered: readers see whole rows
        self._run = None
        if cfg.metrics.wandb_mode != "disabled":
            self._run = _init_wandb(cfg)

    @property
    def wandb_run_dir(self) -> Path | None:
        return Path(self._run.dir).parent if self._run is not None else None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        row = {"step": step, **metrics, "time": time.time()}
        self._file.write(json.dumps(row, allow_nan=True) + "\n")
        if self._run is not None:
            numeric = {k: v for k, v in metrics.items() if isinstance(v, int | float)}
            self._run.log({f"train/{k}": v for k, v in numeric.items()}, step=step)

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        if self._run is not None:
            run, self._run = self._run, None
            run.finish()


def _init_wandb(cfg: TrainConfig) -> Any:
    import wandb  # lazy: heavy, and only rank 0 of a run needs it

    wandb_dir = cfg.wandb_dir()
    wandb_dir.mkdir(parents=True, exist_ok=True)
    return wandb.init(
        # one of WANDB_MODES: MetricsConfig.__post_init__ refuses any other
        mode=cast(Literal["offline", "online", "disabled"], cfg.metrics.wandb_mode),
        dir=str(wandb_dir),
        project=cfg.metrics.wandb_project,
        id=cfg.wandb_run_id(),
        name=cfg.wandb_run_id(),
        group=Path(cfg.checkpoint.run_root).name,
        config=cfg.to_dict(),
        resume="allow",
        settings=wandb.Settings(
            x_transaction_log_flush_interval=1.0,
            console="off",
            x_disable_stats=True,  # system sampling competes with training for 2 CPU cores
            silent=True,
        ),
    )


def finite_or_none(value: float) -> float | None:
    """JSON-safe number for events (NaN/inf become None; the metrics file keeps them)."""
    return value if math.isfinite(value) else None
