"""Callbacks: behaviour that plugs into the training loop instead of flags inside it.

    class PrintLoss(Callback):
        def on_step_end(self, trainer, record):
            if record.loss is not None: print(record.step, record.loss)

    train(cfg, proc, events=sink, metrics=logger, callbacks=[PrintLoss()])

The loop calls, on every rank and in list order: ``on_train_start(trainer)`` once (after the
resume point is restored), ``on_step_end(trainer, record)`` after every step (trained or
skipped; the trainer's state — step, tokens seen, loss window — already includes it), and
``on_train_end(trainer, stopped_by)`` once (``stopped_by`` is the signal name after a stop,
else None). A callback that runs collectives must run them on every rank.

:func:`default_callbacks` builds the standard set from the config:

| callback             | does                                                                |
|----------------------|---------------------------------------------------------------------|
| MetricsCallback      | per-step row to ``metrics`` (W&B + metrics.jsonl), throttled        |
|                      | ``progress`` events, a console progress line on rank 0              |
| SkipEventsCallback   | one ``skipped`` event per run of consecutive skipped steps          |
| CheckpointCallback   | save every ``every_steps`` and at ``max_steps``; on a stop, save the |
|                      | step just finished; commit any async save before the run ends       |
| ValLossCallback      | every ``metrics.val_every_steps``: validation loss, logged as       |
|                      | ``val_loss`` (an eval hook; add your own the same way)              |

A hook that wants a value in the step's metrics row puts it in ``trainer.step_metrics`` before
``MetricsCallback`` runs (earlier in the list).
"""

from __future__ import annotations

import math
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

import numpy as np
import torch

from pretrain.checkpoint.checkpointer import Checkpointer
from pretrain.distributed import ProcessInfo
from pretrain.errors import ConfigError
from pretrain.packing.format import PackedIndex, PackedSplit
from pretrain.train.config import TrainConfig
from pretrain.train.events import EventSink, ProgressThrottle
from pretrain.train.metrics import Metrics, finite_or_none
from pretrain.train.parallel import autocast
from pretrain.train.step import language_model_loss


class Trainer(Protocol):
    """What a callback may read and call of the running trainer (:class:`pretrain.train.loop.Trainer`
    provides it). ``step_metrics`` holds extra values for this step's metrics row."""

    cfg: TrainConfig
    proc: ProcessInfo
    index: PackedIndex
    events: EventSink
    metrics: Metrics
    checkpointer: Checkpointer
    step: int
    tokens_seen: int
    ignore_index: int
    loss_window: deque[tuple[int, float]]
    last_checkpoint: Path | str | None
    step_metrics: dict[str, float]

    # read-only, so that a trainer holding a subclass (Transformer, AdamW) provides them
    @property
    def model(self) -> torch.nn.Module: ...
    @property
    def optimizer(self) -> torch.optim.Optimizer: ...

    def save(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """What one step did. Trained steps fill the loss fields; skipped steps set ``skipped``."""

    step: int
    lr: float
    tokens_seen: int
    skipped: bool = False
    skipped_sequences: int = 0
    loss: float | None = None
    z_loss: float | None = None
    grad_norm: float | None = None
    step_time_s: float | None = None
    data_wait_s: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    memory_gb: float | None = None

    def metrics_row(self) -> dict[str, float | int | bool]:
        """The ``metrics.jsonl`` / W&B row (the step number is added by the sink)."""
        if self.skipped:
            return {"skipped": True, "lr": self.lr, "tokens_seen": self.tokens_seen}
        names: tuple[str, ...] = (
            "loss",
            "z_loss",
            "grad_norm",
            "lr",
            "tokens_per_s",
            "step_time_s",
        )
        names += ("data_wait_s", "mfu", "memory_gb", "tokens_seen")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


class Callback:
    """Base class: override the hooks you need."""

    def on_train_start(self, trainer: Trainer) -> None:
        pass

    def on_step_end(self, trainer: Trainer, record: StepRecord) -> None:
        pass

    def on_train_end(self, trainer: Trainer, stopped_by: str | None) -> None:
        pass


def console_line(record: StepRecord, max_steps: int) -> str:
    """``step 120/200 | loss 3.2140 | lr 2.90e-04 | gnorm 0.84 | 12.3k tok/s | mfu 41.2% | ...``"""
    if record.skipped:
        return f"step {record.step}/{max_steps} | skipped (skip window) | lr {record.lr:.2e}"
    parts = [f"step {record.step}/{max_steps}", f"loss {record.loss:.4f}"]
    if record.z_loss is not None:
        parts.append(f"z {record.z_loss:.3f}")
    parts += [
        f"lr {record.lr:.2e}",
        f"gnorm {record.grad_norm:.3f}",
        f"{(record.tokens_per_s or 0) / 1e3:.1f}k tok/s",
        f"mfu {100 * (record.mfu or 0):.1f}%",
        f"mem {record.memory_gb or 0:.2f} GB",
        f"data {1e3 * (record.data_wait_s or 0):.1f} ms",
        f"step {1e3 * (record.step_time_s or 0):.0f} ms",
    ]
    return " | ".join(parts)


class MetricsCallback(Callback):
    """Metrics rows every step; throttled ``progress`` events; a console line on rank 0."""

    def __init__(self, trainer: Trainer, stream: TextIO | None = None) -> None:
        cfg = trainer.cfg.metrics
        self.throttle = ProgressThrottle(cfg.progress_every_steps, cfg.progress_min_interval_s)
        self.console_every = cfg.console_every_steps if trainer.proc.is_main else 0
        self.stream = stream or sys.stdout

    def on_step_end(self, trainer: Trainer, record: StepRecord) -> None:
        row = {**record.metrics_row(), **trainer.step_metrics}
        trainer.step_metrics.clear()
        trainer.metrics.log(row, step=record.step)
        if self.console_every and (
            record.step % self.console_every == 0 or record.step == trainer.cfg.run.max_steps
        ):
            print(console_line(record, trainer.cfg.run.max_steps), file=self.stream, flush=True)
        if not record.skipped and self.throttle.ready(record.step):
            trainer.events.emit(
                {
                    "event": "progress",
                    "step": record.step,
                    "loss": finite_or_none(record.loss or math.nan),
                    "tokens_per_s": record.tokens_per_s,
                }
            )


class SkipEventsCallback(Callback):
    """Collapses consecutive skipped steps into one ``skipped`` event."""

    def __init__(self) -> None:
        self.start: int | None = None
        self.num_sequences = 0

    def on_step_end(self, trainer: Trainer, record: StepRecord) -> None:
        if record.skipped:
            self.start = record.step if self.start is None else self.start
            self.num_sequences += record.skipped_sequences
        else:
            self._flush(trainer, record.step)

    def on_train_end(self, trainer: Trainer, stopped_by: str | None) -> None:
        self._flush(trainer, trainer.step + 1)

    def _flush(self, trainer: Trainer, end_step: int) -> None:
        if self.start is not None:
            trainer.events.emit(
                {
                    "event": "skipped",
                    "start_step": self.start,
                    "end_step": end_step,
                    "num_sequences": self.num_sequences,
                }
            )
            self.start, self.num_sequences = None, 0


class CheckpointCallback(Callback):
    """Saves on schedule, at the last step, and at the step where a stop was agreed."""

    def __init__(self) -> None:
        self.saved_step: int | None = None

    def on_train_start(self, trainer: Trainer) -> None:
        self.saved_step = trainer.step  # the resume point is already on disk

    def on_step_end(self, trainer: Trainer, record: StepRecord) -> None:
        run, every = trainer.cfg.run, trainer.cfg.checkpoint.every_steps
        if record.step % every == 0 or record.step == run.max_steps:
            trainer.save()
            self.saved_step = record.step

    def on_train_end(self, trainer: Trainer, stopped_by: str | None) -> None:
        if stopped_by and trainer.cfg.run.checkpoint_on_stop and self.saved_step != trainer.step:
            trainer.save()
            self.saved_step = trainer.step
        trainer.checkpointer.wait()  # an async save commits before "finished"/"stopped"


class ValLossCallback(Callback):
    """Eval hook: mean validation cross-entropy on the first ``val_sequences`` of ``val``.

    Every rank scores the same sequences (FSDP needs every rank in each forward), so the value
    is identical everywhere and no reduction is needed. It goes into ``trainer.step_metrics``,
    which :class:`MetricsCallback` (next in the list) merges into the step's row."""

    def __init__(self, trainer: Trainer) -> None:
        cfg = trainer.cfg.metrics
        if "val" not in trainer.index.splits:
            raise ConfigError(
                f"metrics.val_every_steps={cfg.val_every_steps} but {trainer.index.root} has no "
                "'val' split; set val_every_steps=0 or repack with a validation split"
            )
        split = PackedSplit(trainer.index, "val")
        count = min(cfg.val_sequences, len(split))
        self.tokens = torch.from_numpy(split.rows(np.arange(count)))
        self.every = cfg.val_every_steps

    @torch.no_grad()
    def on_step_end(self, trainer: Trainer, record: StepRecord) -> None:
        if record.step % self.every:
            return
        model, micro = trainer.model, trainer.cfg.data.micro_batch_size
        model.eval()
        total, batches = 0.0, 0
        for start in range(0, len(self.tokens), micro):
            tokens = self.tokens[start : start + micro].to(trainer.proc.device)
            with autocast(trainer.proc):
                logits = model(tokens[:, :-1])
            _, ce, _ = language_model_loss(logits, tokens[:, 1:], trainer.ignore_index)
            total, batches = total + float(ce), batches + 1
        model.train()
        trainer.step_metrics["val_loss"] = total / batches  # MetricsCallback logs it


def default_callbacks(trainer: Trainer) -> list[Callback]:
    """Eval hooks first (they add to the step's row), then metrics, then checkpointing (last,
    so a checkpoint sees every other hook's work)."""
    callbacks: list[Callback] = []
    if trainer.cfg.metrics.val_every_steps:
        callbacks.append(ValLossCallback(trainer))
    callbacks += [MetricsCallback(trainer), SkipEventsCallback(), CheckpointCallback()]
    return callbacks
