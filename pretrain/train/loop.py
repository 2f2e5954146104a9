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


def train(
    cfg: TrainConfig,
    proc: ProcessInfo,
    *,
    events: EventSink,
    metrics: Metrics,
    stop: StopFlag | None = None,
) -> TrainResult:
    stop = stop or StopFlag()
    set_determinism(cfg.seed, cfg.deterministic, proc)
    index = read_packed_index(cfg.data.packed_dir)
    check_data(cfg, index)
    accum = cfg.data.accum_steps(proc.world_size)
    micro = cfg.data.micro_batch_size
    model = build_model(cfg.model, proc, seed=cfg.seed)
    optimizer = build_optimizer(model, cfg.optim)
    reader = BatchReader(
        PackedSplit(index, "train"),
        global_batch=cfg.data.global_batch_sequences,
        seed=cfg.data.seed,
        rank=proc.rank,
        world_size=proc.world_size,
    )

    step, tokens_seen = 0, 0
    loss_window: deque[tuple[int, float]] = deque(maxlen=LOSS_WINDOW)
    skipped: list[int] = []
    parent = ckpt.resolve_resume(cfg)
    if parent is not None:
        restored = ckpt.load_checkpoint(
            parent, cfg=cfg, proc=proc, model=model, optimizer=optimizer
        )
        reader.load_state_dict(restored.data_state)
        step, tokens_seen = restored.step, int(restored.meta["tokens_seen"])
        window = restored.meta["loss_window"]
        loss_window.extend(zip(window["steps"], window["losses"], strict=True))
        skipped = list(restored.meta.get("skipped_steps", []))
    ahead = [
        p
        for p in ckpt.list_checkpoints(cfg.checkpoint.run_root, cfg.run.branch)
        if int(p.name.removeprefix("step-")) > step
    ]
    if ahead:
        raise CheckpointError(
            f"branch {cfg.run.branch!r} already has {ahead[-1].name}, beyond the resume point "
            f"(step {step}); resume onto a new branch so no checkpoint key is reused"
        )

    seq_tokens = index.seq_len - 1
    tokens_per_step = cfg.data.global_batch_sequences * seq_tokens
    fpt = flops_per_token(cfg.model, seq_tokens)
    peak = peak_flops_per_device(proc.device, cfg.metrics.peak_flops_per_device)
    ignore_index = index.pad_id if index.pad_id not in (index.eos_id, index.bos_id) else -100
    throttle = ProgressThrottle(
        cfg.metrics.progress_every_steps, cfg.metrics.progress_min_interval_s
    )
    events.emit(
        {
            "event": "started",
            "branch": cfg.run.branch,
            "start_step": step,
            "max_steps": cfg.run.max_steps,
            "world_size": proc.world_size,
            "num_params": num_params(cfg.model),
            "resumed_from": str(parent) if parent else None,
        }
    )

    def save(at_step: int) -> Path:
        meta = {
            "tokens_seen": tokens_seen,
            "data_state": reader.state_dict(),
            "loss_window": _loss_summary(loss_window),
            "skipped_steps": skipped,
            "lineage": {
                "packed_dir": str(index.root),
                "tokenizer_sha256": index.tokenizer_sha256,
                "code_version": pretrain.__version__,
                "parent": str(parent) if parent else None,
            },
        }
        path = ckpt.save_checkpoint(
            cfg=cfg, proc=proc, model=model, optimizer=optimizer, step=at_step, meta=meta
        )
        last = loss_window[-1][1] if loss_window else None
        events.emit(
            {
                "event": "checkpoint",
                "branch": cfg.run.branch,
                "step": at_step,
                "key": ckpt.checkpoint_key(cfg.run.branch, at_step),
                "path": str(path.absolute()),
                "loss": finite_or_none(last) if last is not None else None,
                "tokens_seen": tokens_seen,
            }
        )
        return path

    last_checkpoint: Path | None = parent
    skip_start: int | None = None
    skip_sequences = 0
    stopped_by: str | None = None
    model.train()
    while step < cfg.run.max_steps:
        step += 1
        lr = lr_at(step, cfg.optim, cfg.run.lr_scale)
        if cfg.run.is_skipped(step):
            skip_start = step if skip_start is None else skip_start
            skip_sequences += reader.skip_batch()
            skipped.append(step)
            metrics.log({"skipped": True, "lr": lr, "tokens_seen": tokens_seen}, step=step)
        else:
            if skip_start is not None:
                events.emit(
                    {
                        "event": "skipped",
                        "start_step": skip_start,
                        "end_step": step,
                        "num_sequences": skip_sequences,
                    }
                )
                skip_start, skip_sequences = None, 0
            started = time.perf_counter()
            set_lr(optimizer, lr)
            batch = torch.from_numpy(reader.next_batch())
            loss_sum = torch.zeros((), device=proc.device)
            for i in range(accum):
                micro_batch = batch[i * micro : (i + 1) * micro].to(proc.device, non_blocking=True)
                set_gradient_sync(model, i == accum - 1)
                with autocast(proc):
                    logits = model(micro_batch[:, :-1])
                loss = F.cross_entropy(
                    logits.float().flatten(0, 1),
                    micro_batch[:, 1:].flatten(),
                    ignore_index=ignore_index,
                )
                (loss / accum).backward()
                loss_sum += loss.detach()
            grad_norm = clip_grad_norm(model, cfg.optim.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            mean_loss = loss_sum / accum
            if proc.distributed:
                dist.all_reduce(mean_loss)
                mean_loss /= proc.world_size
            loss_value = float(mean_loss)
            step_time = time.perf_counter() - started
            tokens_seen += tokens_per_step
            tokens_per_s = tokens_per_step / step_time
            loss_window.append((step, loss_value))
            metrics.log(
                {
                    "loss": loss_value,
                    "grad_norm": grad_norm,
                    "lr": lr,
                    "tokens_per_s": tokens_per_s,
                    "step_time_s": step_time,
                    "mfu": mfu(fpt, tokens_per_s, peak, proc.world_size),
                    "memory_gb": memory_gb(proc.device),
                    "tokens_seen": tokens_seen,
                },
                step=step,
            )
            if throttle.ready(step):
                events.emit(
                    {
                        "event": "progress",
                        "step": step,
                        "loss": finite_or_none(loss_value),
                        "tokens_per_s": tokens_per_s,
                    }
                )
        stopping = agree_to_stop(stop, proc)
        due = step % cfg.checkpoint.every_steps == 0 or step == cfg.run.max_steps
        if due or (stopping and cfg.run.checkpoint_on_stop):
            last_checkpoint = save(step)
        if stopping:
            stopped_by = stop.signal_name or "peer_rank"  # another rank got the signal
            events.emit({"event": "stopped", "step": step, "signal": stopped_by})
            break
    if skip_start is not None:
        events.emit(
            {
                "event": "skipped",
                "start_step": skip_start,
                "end_step": step + 1,
                "num_sequences": skip_sequences,
            }
        )
    final_loss = loss_window[-1][1] if loss_window else None
    if stopped_by is None:
        events.emit(
            {
                "event": "finished",
                "step": step,
                "tokens_seen": tokens_seen,
                "final_loss": finite_or_none(final_loss) if final_loss is not None else None,
            }
        )
    return TrainResult(
        step=step,
        final_loss=final_loss,
        tokens_seen=tokens_seen,
        last_checkpoint=last_checkpoint,
        stopped_by=stopped_by,
    )
