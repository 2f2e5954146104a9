"""Trainer configuration: frozen, keyword-only dataclasses, one per component.

Torch-free, so the Dagster launcher can build and write a config without importing torch:

    from pretrain.train.config import TrainConfig
    cfg = TrainConfig.from_json(open("run.json").read())
    open("run.json", "w").write(cfg.to_json())

Steps are 1-based: step ``s`` is the s-th optimizer update and trains on the s-th global batch
of the data stream. ``run.skip_windows`` holds half-open ``[start_step, end_step)`` ranges whose
batches are read and thrown away (no forward/backward/update) while the step counter and LR
schedule still advance, so step numbers keep pointing at the same data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pretrain.checkpoint.config import CheckpointConfig
from pretrain.errors import ConfigError
from pretrain.model.config import ModelConfig
from pretrain.run_files import wandb_run_id
from pretrain.settings import check_types, checked_value, describe, optional_inner

_BRANCH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
WANDB_MODES = ("offline", "online", "disabled")
SCHEDULES = ("cosine", "wsd")


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """AdamW with linear warmup to ``lr``, then a decay to ``lr * min_lr_ratio`` at
    ``schedule_steps``: ``schedule="cosine"`` (cosine over the whole rest) or ``"wsd"``
    (warmup-stable-decay: hold ``lr``, then decay linearly over the last ``decay_fraction`` of
    the schedule; a WSD run can be extended by moving ``schedule_steps`` before the decay).

    ``schedule_steps`` is the horizon (normally the planned total step count); it is separate
    from ``run.max_steps`` so stopping early and resuming keeps the same curve.
    ``z_loss_weight`` > 0 adds ``z_loss_weight · mean(logsumexp(logits)²)`` to the loss (PaLM
    uses 1e-4): it keeps the output logits from drifting and is logged as ``z_loss``.
    """

    lr: float = 3e-4
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    warmup_steps: int = 100
    schedule_steps: int
    min_lr_ratio: float = 0.1
    schedule: str = "cosine"
    decay_fraction: float = 0.2
    z_loss_weight: float = 0.0

    def __post_init__(self) -> None:
        check_types(self)
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"optim.schedule={self.schedule!r}; use one of {SCHEDULES}")
        if not 0 < self.decay_fraction <= 1:
            raise ConfigError(
                f"optim.decay_fraction={self.decay_fraction} must be in (0, 1] (WSD decays over "
                "that fraction of schedule_steps; 0.1-0.2 is usual)"
            )
        if self.z_loss_weight < 0:
            raise ConfigError(
                f"optim.z_loss_weight must be >= 0 (1e-4 is usual), got {self.z_loss_weight}"
            )
        if self.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.lr}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"optim.betas must be two values in [0, 1), got {self.betas}")
        if self.weight_decay < 0 or self.grad_clip <= 0 or self.eps <= 0:
            raise ConfigError("optim.weight_decay must be >= 0, grad_clip and eps > 0")
        if self.warmup_steps < 0 or self.schedule_steps <= 0:
            raise ConfigError("optim.warmup_steps must be >= 0 and optim.schedule_steps > 0")
        if self.warmup_steps > self.schedule_steps:
            raise ConfigError(
                f"optim.warmup_steps={self.warmup_steps} exceeds schedule_steps="
                f"{self.schedule_steps}; lower warmup_steps or raise schedule_steps"
            )
        if not 0 <= self.min_lr_ratio <= 1:
            raise ConfigError(f"optim.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Packed token shards (see pretrain/packing.py) and how many sequences make a step.

    ``global_batch_sequences`` = micro_batch_size × grad-accumulation steps × world size;
    the accumulation count is derived at start-up.
    """

    packed_dir: str
    micro_batch_size: int
    global_batch_sequences: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_types(self)
        if not self.packed_dir:
            raise ConfigError("data.packed_dir is empty; point it at a packed_tokens directory")
        if self.micro_batch_size <= 0 or self.global_batch_sequences <= 0:
            raise ConfigError("data.micro_batch_size and data.global_batch_sequences must be > 0")
        if self.global_batch_sequences % self.micro_batch_size:
            lower = self.global_batch_sequences // self.micro_batch_size * self.micro_batch_size
            near = [n for n in (lower, lower + self.micro_batch_size) if n > 0]
            raise ConfigError(
                f"data.global_batch_sequences={self.global_batch_sequences} is not a multiple of "
                f"data.micro_batch_size={self.micro_batch_size}: set "
                f"data.global_batch_sequences to {' or '.join(map(str, near))}, or another "
                "micro_batch_size (a recipe launch that sets only micro_batch_size derives the "
                "global batch itself)"
            )

    def accum_steps(self, world_size: int) -> int:
        """Micro-batches per rank per step; raises with the nearest valid sizes if it is fractional."""
        per_step = self.micro_batch_size * world_size
        if self.global_batch_sequences % per_step:
            lower = max(per_step, self.global_batch_sequences // per_step * per_step)
            raise ConfigError(
                f"data.global_batch_sequences={self.global_batch_sequences} must be a multiple of "
                f"micro_batch_size × world_size = {self.micro_batch_size} × {world_size}; "
                f"use {lower} or {lower + per_step}, or change micro_batch_size"
            )
        return self.global_batch_sequences // per_step


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One invocation of the trainer on one branch of the run's history.

    ``init_from`` (a checkpoint folder or ``s3://`` URI) starts a run that has no checkpoint of
    its own from that checkpoint's **weights** only: a fresh optimizer, step 0, the data from its
    start (continued pretraining, or an anneal probe that several arms start from one shared
    proxy). Once the run has checkpointed, resuming it ignores ``init_from``.

    On SIGTERM/SIGINT the trainer finishes the current step, saves a checkpoint there
    (``checkpoint_on_stop``) and exits 0.

    ``inject_nan_at_step`` is a fault-injection hook for tests only (off by default): the logits
    of that step become NaN, so its loss, gradients and then the weights are NaN, as a corrupt
    batch or an overflow would make them. A skip window covering the step avoids it.
    """

    branch: str = "b00"
    max_steps: int
    resume: str = "latest"
    init_from: str | None = None  # a checkpoint whose weights start a fresh run (see below)
    lr_scale: float = 1.0
    skip_windows: tuple[tuple[int, int], ...] = ()
    checkpoint_on_stop: bool = True
    inject_nan_at_step: int | None = None  # tests only: see the class docstring

    def __post_init__(self) -> None:
        check_types(self)
        if not _BRANCH_RE.match(self.branch):
            raise ConfigError(
                f"run.branch={self.branch!r} must be a simple name like 'b00' (letters, digits, "
                "'_', '-', '.'; no '/')"
            )
        if self.max_steps <= 0:
            raise ConfigError(f"run.max_steps must be >= 1, got {self.max_steps}")
        if not self.resume:
            raise ConfigError("run.resume must be 'latest', 'none' or a checkpoint directory")
        if self.lr_scale <= 0:
            raise ConfigError(f"run.lr_scale must be > 0, got {self.lr_scale}")
        if self.inject_nan_at_step is not None and self.inject_nan_at_step < 1:
            raise ConfigError(f"run.inject_nan_at_step must be >= 1, got {self.inject_nan_at_step}")
        for window in self.skip_windows:
            if len(window) != 2 or not 1 <= window[0] < window[1]:
                raise ConfigError(
                    f"run.skip_windows entry {window!r} must be [start_step, end_step) with "
                    "1 <= start_step < end_step"
                )

    def is_skipped(self, step: int) -> bool:
        return any(start <= step < end for start, end in self.skip_windows)


@dataclass(frozen=True, kw_only=True)
class MetricsConfig:
    """Per-step metrics (W&B + a local JSONL) and lifecycle events.

    ``None`` paths resolve under ``<run_root>/<branch>/``: ``metrics.jsonl``, ``events.jsonl``;
    W&B files go to ``<wandb_dir>/wandb/offline-run-*`` (default ``<run_root>``). The W&B run id
    defaults to ``<branch>-<hash of run_root>`` so a crash-resume of a branch appends to its run.
    A progress event is emitted when at least ``progress_every_steps`` steps **and**
    ``progress_min_interval_s`` seconds have passed since the last one. Rank 0 prints a console
    progress line every ``console_every_steps`` steps (0: never). ``val_every_steps`` > 0 runs
    the validation-loss hook on the first ``val_sequences`` sequences of the ``val`` split.
    ``peak_flops_per_device`` overrides the MFU peak table (bf16 dense FLOP/s per device).
    With an ``s3://`` run root, rank 0 copies the metrics, events and W&B files from the staging
    folder to the run root (where the recovery sensors read them) every ``mirror_interval_s``
    seconds, after each checkpoint commit and at exit (:mod:`pretrain.train.mirror`; 0: after
    every step).
    """

    wandb_mode: str = "offline"
    wandb_project: str = "pretrain"
    wandb_dir: str | None = None
    wandb_run_id: str | None = None
    metrics_file: str | None = None
    events_file: str | None = None
    progress_every_steps: int = 10
    progress_min_interval_s: float = 30.0
    peak_flops_per_device: float | None = None
    console_every_steps: int = 10
    val_every_steps: int = 0
    val_sequences: int = 32
    mirror_interval_s: float = 30.0

    def __post_init__(self) -> None:
        check_types(self)
        if self.mirror_interval_s < 0:
            raise ConfigError(
                f"metrics.mirror_interval_s={self.mirror_interval_s} must be >= 0 (seconds "
                "between uploads of the run files to an s3:// run root; 0: every step)"
            )
        if self.console_every_steps < 0 or self.val_every_steps < 0 or self.val_sequences <= 0:
            raise ConfigError(
                "metrics.console_every_steps and val_every_steps must be >= 0 (0: off), "
                "val_sequences >= 1"
            )
        if self.wandb_mode not in WANDB_MODES:
            raise ConfigError(f"metrics.wandb_mode={self.wandb_mode!r}; use one of {WANDB_MODES}")
        if self.progress_every_steps <= 0 or self.progress_min_interval_s < 0:
            raise ConfigError("metrics.progress_every_steps must be >= 1, min_interval_s >= 0")
        if self.peak_flops_per_device is not None and self.peak_flops_per_device <= 0:
            raise ConfigError("metrics.peak_flops_per_device must be > 0 (FLOP/s) or null")


@dataclass(frozen=True, kw_only=True)
class ComputeConfig:
    """How the model's compute runs; none of it changes the weights' layout or checkpoint keys.

    ``activation_checkpointing``: recompute each block's activations in the backward pass
    (about 1/3 more compute, activation memory of one block instead of all). ``compile``:
    ``torch.compile`` each block (``compile_backend="inductor"``; ``"eager"`` only traces, for
    tests). Both apply before FSDP2 sharding, per block, as in torchtitan.
    """

    activation_checkpointing: bool = False
    compile: bool = False
    compile_backend: str = "inductor"

    def __post_init__(self) -> None:
        check_types(self)
        if self.compile_backend not in ("inductor", "aot_eager", "eager"):
            raise ConfigError(
                f"compute.compile_backend={self.compile_backend!r}; use 'inductor' (GPU and "
                "CPU with a C++ compiler), 'aot_eager' or 'eager'"
            )


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    model: ModelConfig
    optim: OptimConfig
    data: DataConfig
    checkpoint: CheckpointConfig
    run: RunConfig
    metrics: MetricsConfig = MetricsConfig()
    compute: ComputeConfig = ComputeConfig()
    seed: int = 0
    deterministic: bool = False

    def __post_init__(self) -> None:
        check_types(self)
        if self.run.max_steps > self.optim.schedule_steps:
            # allowed (LR stays at its floor), but usually a mistake worth failing on
            raise ConfigError(
                f"run.max_steps={self.run.max_steps} exceeds optim.schedule_steps="
                f"{self.optim.schedule_steps}; raise schedule_steps to the planned total steps"
            )

    # -- resolved paths ---------------------------------------------------------------------
    def is_remote(self) -> bool:
        """Checkpoints on object storage (``s3://``), staged locally (see CheckpointConfig)."""
        return self.checkpoint.is_remote()

    def local_root(self) -> Path:
        """Where this trainer writes locally: the run root, or the staging folder of an S3 one."""
        return self.checkpoint.local_root()

    def branch_dir(self) -> Path:
        """The branch's local folder (checkpoint staging, metrics, events)."""
        return self.checkpoint.branch_dir(self.run.branch)

    def metrics_path(self) -> Path:
        return Path(self.metrics.metrics_file or self.branch_dir() / "metrics.jsonl")

    def events_path(self) -> Path:
        return Path(self.metrics.events_file or self.branch_dir() / "events.jsonl")

    def wandb_dir(self) -> Path:
        return Path(self.metrics.wandb_dir or self.local_root())

    def wandb_run_id(self) -> str:
        if self.metrics.wandb_run_id:
            return self.metrics.wandb_run_id
        return wandb_run_id(self.checkpoint.run_root, self.run.branch)  # as the sensors

    # -- serialization ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def sha256(self) -> str:
        """Hash of the effective config (its canonical JSON): which run made a checkpoint."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return _build(cls, data, "config")

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"run config is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    def replace(self, **sections: Any) -> TrainConfig:
        """Copy with some sections replaced, e.g. ``cfg.replace(run=dataclasses.replace(cfg.run, max_steps=8))``."""
        return dataclasses.replace(self, **sections)


def train_config(
    model: ModelConfig,
    *,
    packed_dir: str,
    run_root: str,
    max_steps: int,
    lr: float,
    warmup_steps: int,
    micro_batch_size: int,
    global_batch_sequences: int,
    every_steps: int,
    schedule_steps: int | None = None,
    wandb_mode: str = "offline",
    deterministic: bool = False,
    checkpoint: dict[str, Any] | None = None,
    run: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
) -> TrainConfig:
    """A TrainConfig from the values that usually differ between runs; ``checkpoint``, ``run``
    and ``metrics`` add further fields of those sections (``{"keep_last": 3}``).
    ``schedule_steps`` defaults to ``max_steps``."""
    return TrainConfig(
        model=model,
        optim=OptimConfig(
            lr=lr,
            warmup_steps=warmup_steps,
            schedule_steps=max_steps if schedule_steps is None else schedule_steps,
        ),
        data=DataConfig(
            packed_dir=packed_dir,
            micro_batch_size=micro_batch_size,
            global_batch_sequences=global_batch_sequences,
        ),
        checkpoint=CheckpointConfig(run_root=run_root, every_steps=every_steps, **checkpoint or {}),
        run=RunConfig(max_steps=max_steps, **run or {}),
        metrics=MetricsConfig(wandb_mode=wandb_mode, **metrics or {}),
        deterministic=deterministic,
    )


def _build(cls: type, data: Any, where: str) -> Any:
    """Rebuild a (nested) frozen dataclass from JSON data; unknown keys are an error."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a JSON object, got {describe(data)}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"unknown keys {sorted(unknown)} in {where}; known: {sorted(known)}")
    kwargs = {key: _convert(hints[key], value, f"{where}.{key}") for key, value in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise ConfigError(f"{where}: {exc}") from exc


def _convert(hint: Any, value: Any, where: str) -> Any:
    """``value`` checked strictly against ``hint`` (lists turned into tuples, ints given for
    floats into floats); a mismatch raises ``ConfigError`` naming the field: ``config.run.max_steps
    must be an integer, got str '200'``. ``null`` is accepted only where the field is optional."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a nested section
        return _build(hint, value, where)
    inner, optional = optional_inner(hint)
    if optional and value is None:
        return None
    if isinstance(inner, type) and dataclasses.is_dataclass(inner):
        return _build(inner, value, where)
    value = checked_value(inner, value, where)
    return float(value) if inner is float else value


def build_section(cls: type, data: dict[str, Any], where: str) -> Any:
    """One config section (a dataclass) from JSON-like data, checked as ``run.json`` is."""
    return _build(cls, data, where)
