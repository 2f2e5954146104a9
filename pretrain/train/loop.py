"""The training loop: one function, :func:`train`, run identically on 1 or N processes.

    result = train(cfg, proc, events=JsonlEventSink("events.jsonl"), metrics=MetricsLogger(cfg))

Per step ``s`` (1-based): read this rank's slice of global batch ``s``, run
``accum = global_batch / (micro_batch × world_size)`` forward/backward passes (FSDP's gradient
reduce-scatter only on the last), clip the global gradient norm, AdamW step at ``lr_at(s)``,
average the loss over ranks, log metrics (rank 0), emit a throttled progress event, and save a
checkpoint every ``checkpoint.every_steps`` steps and at ``run.max_steps``. Steps inside a
``run.skip_windows`` range consume their batch without training on it.

Exact resume: all state that influences step ``s+1`` — weights, AdamW moments and step count,
the data cursor, RNG states — is in the step-``s`` checkpoint, and the LR is a function of the
step, so with ``deterministic=True`` on CPU a resumed run reproduces an uninterrupted run's
losses bit for bit.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

import pretrain
from pretrain.errors import CheckpointError, ConfigError
from pretrain.model.config import flops_per_token, num_params
from pretrain.train import checkpoint as ckpt
from pretrain.train.config import TrainConfig
from pretrain.train.data import BatchReader, PackedIndex, PackedSplit, read_packed_index
from pretrain.train.events import EventSink, ProgressThrottle
from pretrain.train.metrics import Metrics, finite_or_none, memory_gb, mfu, peak_flops_per_device
from pretrain.train.optim import build_optimizer, lr_at, set_lr
from pretrain.train.parallel import autocast, build_model, clip_grad_norm, set_gradient_sync
from pretrain.train.process import ProcessInfo, StopFlag, agree_to_stop, set_determinism

LOSS_WINDOW = 50


@dataclass(frozen=True, kw_only=True)
class TrainResult:
    step: int
    final_loss: float | None
    tokens_seen: int
    last_checkpoint: Path | None
    stopped_by: str | None  # signal name when stopped early, else None


def check_data(cfg: TrainConfig, index: PackedIndex) -> None:
    if index.vocab_size > cfg.model.vocab_size:
        raise ConfigError(
            f"packed data has vocab_size={index.vocab_size} but model.vocab_size="
            f"{cfg.model.vocab_size}; set model.vocab_size >= {index.vocab_size}"
        )
    if index.seq_len - 1 > cfg.model.max_seq_len:
        raise ConfigError(
            f"packed seq_len={index.seq_len} needs model.max_seq_len >= {index.seq_len - 1}"
        )


def _loss_summary(window: deque[tuple[int, float]]) -> dict[str, Any]:
    losses = [loss for _, loss in window]
    if not losses:
        return {"steps": [], "losses": [], "mean": None, "min": None, "max": None, "last": None}
    return {
        "steps": [s for s, _ in window],
        "losses": losses,
        "mean": sum(losses) / len(losses),
        "min": min(losses),
        "max": max(losses),
        "last": losses[-1],
    }


class Trainer:
    """The state of one training invocation; :func:`train` is the public entry point."""

    def __init__(self, cfg: TrainConfig, proc: ProcessInfo, events: EventSink, metrics: Metrics):
        self.cfg, self.proc, self.events, self.metrics = cfg, proc, events, metrics
        set_determinism(cfg.seed, cfg.deterministic, proc)
        self.index = read_packed_index(cfg.data.packed_dir)
        check_data(cfg, self.index)
        self.accum = cfg.data.accum_steps(proc.world_size)
        self.model = build_model(cfg.model, proc, seed=cfg.seed)
        self.optimizer = build_optimizer(self.model, cfg.optim)
        self.reader = BatchReader(
            PackedSplit(self.index, "train"),
            global_batch=cfg.data.global_batch_sequences,
            seed=cfg.data.seed,
            rank=proc.rank,
            world_size=proc.world_size,
        )
        pad, special = self.index.pad_id, (self.index.eos_id, self.index.bos_id)
        self.ignore_index = pad if pad not in special else -100
        self.step, self.tokens_seen = 0, 0
        self.loss_window: deque[tuple[int, float]] = deque(maxlen=LOSS_WINDOW)
        self.skipped: list[int] = []
        self.parent: Path | None = None

    def restore(self) -> None:
        """Load the resume checkpoint (if any); refuse to rewrite an existing branch history."""
        cfg = self.cfg
        self.parent = ckpt.resolve_resume(cfg)
        if self.parent is not None:
            restored = ckpt.load_checkpoint(
                self.parent, cfg=cfg, proc=self.proc, model=self.model, optimizer=self.optimizer
            )
            self.reader.load_state_dict(restored.data_state)
            self.step, self.tokens_seen = restored.step, int(restored.meta["tokens_seen"])
            window = restored.meta["loss_window"]
            self.loss_window.extend(zip(window["steps"], window["losses"], strict=True))
            self.skipped = list(restored.meta.get("skipped_steps", []))
        ahead = [
            p
            for p in ckpt.list_checkpoints(cfg.checkpoint.run_root, cfg.run.branch)
            if int(p.name.removeprefix("step-")) > self.step
        ]
        if ahead:
            raise CheckpointError(
                f"branch {cfg.run.branch!r} already has {ahead[-1].name}, beyond the resume "
                f"point (step {self.step}); resume onto a new branch so no key is reused"
            )

    def train_step(self, lr: float) -> tuple[float, float]:
        """One optimizer update on this rank's slice of the next global batch.

        Returns (loss averaged over micro-batches and ranks, pre-clip gradient norm)."""
        set_lr(self.optimizer, lr)
        batch = torch.from_numpy(self.reader.next_batch())
        micro = self.cfg.data.micro_batch_size
        loss_sum = torch.zeros((), device=self.proc.device)
        for i in range(self.accum):
            tokens = batch[i * micro : (i + 1) * micro].to(self.proc.device, non_blocking=True)
            set_gradient_sync(self.model, i == self.accum - 1)
            with autocast(self.proc):
                logits = self.model(tokens[:, :-1])
            loss = F.cross_entropy(
                logits.float().flatten(0, 1),
                tokens[:, 1:].flatten(),
                ignore_index=self.ignore_index,
            )
            (loss / self.accum).backward()
            loss_sum += loss.detach()
        grad_norm = clip_grad_norm(self.model, self.cfg.optim.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        mean_loss = loss_sum / self.accum
        if self.proc.distributed:
            dist.all_reduce(mean_loss)
            mean_loss /= self.proc.world_size
        return float(mean_loss), grad_norm

    def save(self) -> Path:
        cfg, index = self.cfg, self.index
        meta = {
            "tokens_seen": self.tokens_seen,
            "data_state": self.reader.state_dict(),
            "loss_window": _loss_summary(self.loss_window),
            "skipped_steps": self.skipped,
            "lineage": {
                "packed_dir": str(index.root),
                "tokenizer_sha256": index.tokenizer_sha256,
                "code_version": pretrain.__version__,
                "parent": str(self.parent) if self.parent else None,
            },
        }
        path = ckpt.save_checkpoint(
            cfg=cfg,
            proc=self.proc,
            model=self.model,
            optimizer=self.optimizer,
            step=self.step,
            meta=meta,
        )
        self.events.emit(
            {
                "event": "checkpoint",
                "branch": cfg.run.branch,
                "step": self.step,
                "key": ckpt.checkpoint_key(cfg.run.branch, self.step),
                "path": str(path.absolute()),
                "loss": self.last_loss(),
                "tokens_seen": self.tokens_seen,
            }
        )
        return path

    def last_loss(self) -> float | None:
        return finite_or_none(self.loss_window[-1][1]) if self.loss_window else None

    def run(self, stop: StopFlag) -> TrainResult:
        cfg, proc = self.cfg, self.proc
        seq_tokens = self.index.seq_len - 1
        tokens_per_step = cfg.data.global_batch_sequences * seq_tokens
        fpt = flops_per_token(cfg.model, seq_tokens)
        peak = peak_flops_per_device(proc.device, cfg.metrics.peak_flops_per_device)
        throttle = ProgressThrottle(
            cfg.metrics.progress_every_steps, cfg.metrics.progress_min_interval_s
        )
        self.events.emit(
            {
                "event": "started",
                "branch": cfg.run.branch,
                "start_step": self.step,
                "max_steps": cfg.run.max_steps,
                "world_size": proc.world_size,
                "num_params": num_params(cfg.model),
                "resumed_from": str(self.parent) if self.parent else None,
            }
        )
        last_checkpoint, stopped_by = self.parent, None
        skip = _SkipTracker(self.events)
        self.model.train()
        while self.step < cfg.run.max_steps:
            self.step += 1
            lr = lr_at(self.step, cfg.optim, cfg.run.lr_scale)
            if cfg.run.is_skipped(self.step):
                skip.add(self.step, self.reader.skip_batch())
                self.skipped.append(self.step)
                row = {"skipped": True, "lr": lr, "tokens_seen": self.tokens_seen}
                self.metrics.log(row, step=self.step)
            else:
                skip.flush(self.step)
                started = time.perf_counter()
                loss, grad_norm = self.train_step(lr)
                step_time = time.perf_counter() - started
                self.tokens_seen += tokens_per_step
                tokens_per_s = tokens_per_step / step_time
                self.loss_window.append((self.step, loss))
                self.metrics.log(
                    {
                        "loss": loss,
                        "grad_norm": grad_norm,
                        "lr": lr,
                        "tokens_per_s": tokens_per_s,
                        "step_time_s": step_time,
                        "mfu": mfu(fpt, tokens_per_s, peak, proc.world_size),
                        "memory_gb": memory_gb(proc.device),
                        "tokens_seen": self.tokens_seen,
                    },
                    step=self.step,
                )
                if throttle.ready(self.step):
                    self.events.emit(
                        {
                            "event": "progress",
                            "step": self.step,
                            "loss": finite_or_none(loss),
                            "tokens_per_s": tokens_per_s,
                        }
                    )
            stopping = agree_to_stop(stop, proc)
            due = self.step % cfg.checkpoint.every_steps == 0 or self.step == cfg.run.max_steps
            if due or (stopping and cfg.run.checkpoint_on_stop):
                last_checkpoint = self.save()
            if stopping:
                stopped_by = stop.signal_name or "peer_rank"  # another rank got the signal
                self.events.emit({"event": "stopped", "step": self.step, "signal": stopped_by})
                break
        skip.flush(self.step + 1)
        if stopped_by is None:
            self.events.emit(
                {
                    "event": "finished",
                    "step": self.step,
                    "final_loss": self.last_loss(),
                    "tokens_seen": self.tokens_seen,
                }
            )
        return TrainResult(
            step=self.step,
            final_loss=self.loss_window[-1][1] if self.loss_window else None,
            tokens_seen=self.tokens_seen,
            last_checkpoint=last_checkpoint,
            stopped_by=stopped_by,
        )


class _SkipTracker:
    """Collapses consecutive skipped steps into one ``skipped`` event."""

    def __init__(self, events: EventSink) -> None:
        self.events, self.start, self.num_sequences = events, None, 0

    def add(self, step: int, num_sequences: int) -> None:
        self.start = step if self.start is None else self.start
        self.num_sequences += num_sequences

    def flush(self, end_step: int) -> None:
        if self.start is not None:
            self.events.emit(
                {
                    "event": "skipped",
                    "start_step": self.start,
                    "end_step": end_step,
                    "num_sequences": self.num_sequences,
                }
            )
            self.start, self.num_sequences = None, 0


def train(
    cfg: TrainConfig,
    proc: ProcessInfo,
    *,
    events: EventSink,
    metrics: Metrics,
    stop: StopFlag | None = None,
) -> TrainResult:
    """Train ``cfg`` on this process (collective when distributed); returns where it ended."""
    trainer = Trainer(cfg, proc, events, metrics)
    trainer.restore()
    return trainer.run(stop or StopFlag())
