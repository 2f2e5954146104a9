"""The training loop: one function, :func:`train`, run identically on 1 or N processes.

    result = train(cfg, proc, events=JsonlEventSink("events.jsonl"), metrics=MetricsLogger(cfg))
    result = train(cfg, proc, events=sink, metrics=logger, callbacks=[MyEvalHook()])

Per step ``s`` (1-based): train on this rank's slice of global batch ``s`` at ``lr_at(s)``
(:func:`pretrain.train.step.train_step`), or consume the batch without training when ``s`` is
in a ``run.skip_windows`` range; update the trainer's state (step, tokens seen, loss window);
run the callbacks (:mod:`pretrain.train.callbacks`: metrics + progress, eval hooks,
checkpoints); then agree across ranks whether a SIGTERM/SIGINT arrived. After a stop the
checkpoint callback saves the step just finished and the loop ends with ``stopped_by`` set (the
CLI exits 0).

Exact resume: all state that influences step ``s+1`` — weights, AdamW moments and step count,
the data cursor, RNG states — is in the step-``s`` checkpoint, and the LR is a function of the
step, so with ``deterministic=True`` on CPU a resumed run reproduces an uninterrupted run's
losses bit for bit, even after a ``kill -9`` (tests/unit/train/test_train_resume.py).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pretrain
from pretrain import identity, storage
from pretrain.checkpoint import dcp as ckpt
from pretrain.checkpoint.checkpointer import Checkpointer, healthy_reason
from pretrain.distributed import (
    ProcessInfo,
    StopFlag,
    agree_to_stop,
    barrier,
    broadcast_from_main,
    set_determinism,
)
from pretrain.errors import CheckpointError, ConfigError, DataError
from pretrain.model.config import flops_per_token, num_params
from pretrain.packing.format import PackedIndex, PackedSplit, read_packed_index
from pretrain.packing.order import BatchReader
from pretrain.train.callbacks import Callback, StepRecord, default_callbacks
from pretrain.train.config import TrainConfig
from pretrain.train.events import EventSink
from pretrain.train.metrics import Metrics, finite_or_none, memory_gb, mfu, peak_flops_per_device
from pretrain.train.optim import build_optimizer, lr_at
from pretrain.train.parallel import build_model
from pretrain.train.step import train_step

LOSS_WINDOW = 50


@dataclass(frozen=True, kw_only=True)
class TrainResult:
    step: int
    final_loss: float | None
    tokens_seen: int
    last_checkpoint: Path | str | None  # str: an s3:// URI
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
    """The state of one training invocation; :func:`train` is the public entry point.

    Callbacks read (and eval hooks may use) ``cfg``, ``proc``, ``model``, ``optimizer``,
    ``index``, ``step``, ``tokens_seen``, ``loss_window``, ``events``, ``metrics``,
    ``checkpointer``, ``last_checkpoint`` and ``step_metrics`` (extra values for this step's
    metrics row)."""

    def __init__(self, cfg: TrainConfig, proc: ProcessInfo, events: EventSink, metrics: Metrics):
        self.cfg, self.proc, self.events, self.metrics = cfg, proc, events, metrics
        set_determinism(cfg.seed, cfg.deterministic, proc)
        self.index = read_packed_index(cfg.data.packed_dir)
        # what the checkpoints were trained on, by identity (None: packed outside a stage)
        packed = identity.read(cfg.data.packed_dir)
        self.packed_version = packed.version if packed else None
        check_data(cfg, self.index)
        self.accum = cfg.data.accum_steps(proc.world_size)
        self.model = build_model(cfg.model, proc, seed=cfg.seed, compute=cfg.compute)
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
        self.parent: Path | str | None = None  # str: an s3:// URI
        self.initialized_from: str | None = None  # run.init_from, once its weights are loaded
        self.last_checkpoint: Path | str | None = None
        self.step_metrics: dict[str, float] = {}
        self.checkpointer = Checkpointer(
            cfg.checkpoint,
            proc,
            branch=cfg.run.branch,
            run_config=cfg.to_dict(),
            on_commit=[self._on_commit],
        )

    def restore(self) -> None:
        """Load the resume checkpoint (if any); refuse to rewrite an existing branch history."""
        cfg = self.cfg
        # rank 0 verifies (and moves damaged checkpoints aside), the others follow its choice
        choice = None
        if self.proc.is_main:
            choice = ckpt.resolve_resume(
                cfg.checkpoint, branch=cfg.run.branch, resume=cfg.run.resume, quarantine=True
            )
            self._report_damaged(choice)
        picked = None
        if choice is not None and choice.path is not None:
            picked = (str(choice.path), str(choice.local))
        picked = broadcast_from_main(picked, self.proc)
        self.parent = None
        if picked is not None:
            uri, local = picked
            remote = storage.is_s3(uri)
            if remote and self.proc.local_rank == 0 and not self.proc.is_main:
                _, problems = ckpt.local_copy(
                    cfg.checkpoint, uri
                )  # another node: its own verified copy
                if problems:
                    raise CheckpointError(f"{uri} is damaged: " + "; ".join(problems))
            barrier(self.proc)
            self.parent = uri if remote else Path(uri)
            restored = ckpt.load_checkpoint(
                Path(local),
                model_cfg=cfg.model,
                proc=self.proc,
                model=self.model,
                optimizer=self.optimizer,
                verify=False,  # rank 0 just did
            )
            if remote:  # every rank of this node has read the verified download: drop it
                barrier(self.proc)
                if self.proc.local_rank == 0:
                    shutil.rmtree(local, ignore_errors=True)
            self.reader.load_state_dict(restored.data_state)
            self.step, self.tokens_seen = restored.step, int(restored.meta["tokens_seen"])
            window = restored.meta["loss_window"]
            self.loss_window.extend(zip(window["steps"], window["losses"], strict=True))
            self.skipped = list(restored.meta.get("skipped_steps", []))
            self.initialized_from = restored.meta.get("lineage", {}).get("initialized_from")
        elif cfg.run.init_from:
            self._init_weights(cfg.run.init_from)
        self.last_checkpoint = self.parent
        ahead = [
            p
            for p in ckpt.list_checkpoints(cfg.checkpoint.run_root, cfg.run.branch)
            if ckpt.step_of(p) > self.step
        ]
        if ahead:
            raise CheckpointError(
                f"branch {cfg.run.branch!r} already has {Path(ahead[-1]).name}, beyond the resume "
                f"point (step {self.step}); resume onto a new branch so no key is reused"
            )

    def _init_weights(self, source: str) -> None:
        """Start from ``source``'s weights (``run.init_from``): each node's first rank makes a
        verified local copy, then every rank loads the model state (collective)."""
        local: str | None = None
        problems: list[str] = []
        if self.proc.local_rank == 0:
            path, problems = ckpt.local_copy(self.cfg.checkpoint, source)
            local = str(path)
        problems = broadcast_from_main(problems, self.proc)
        if problems:
            raise CheckpointError(
                f"run.init_from={source} is damaged or missing: " + "; ".join(problems)
            )
        local = broadcast_from_main(local, self.proc)
        barrier(self.proc)
        assert local is not None  # rank 0 is a node's first rank
        ckpt.load_model_weights(Path(local), model_cfg=self.cfg.model, proc=self.proc,
                                model=self.model)  # fmt: skip
        self.initialized_from = source

    def _report_damaged(self, choice: ckpt.ResumeChoice) -> None:
        """One ``checkpoint_damaged`` event and log line per damaged checkpoint passed over."""
        for damaged in choice.damaged:
            fallback = str(choice.path) if choice.path else None
            print(
                f"WARNING: checkpoint {damaged.path} is damaged ({'; '.join(damaged.problems)}); "
                f"moved to {damaged.moved_to}; resuming from {fallback or 'scratch'}",
                file=sys.stderr,
                flush=True,
            )
            self.events.emit(
                {
                    "event": "checkpoint_damaged",
                    "branch": self.cfg.run.branch,
                    "step": ckpt.step_of(damaged.path),
                    "path": str(damaged.path),
                    "moved_to": str(damaged.moved_to) if damaged.moved_to else None,
                    "problems": list(damaged.problems),
                    "resumed_from": fallback,
                }
            )

    def save(self) -> None:
        """Checkpoint the current step (collective); the ``checkpoint`` event follows the commit."""
        index = self.index
        meta = {
            "tokens_seen": self.tokens_seen,
            "data_state": self.reader.checkpoint_state(),  # cursor + what a resume verifies
            "loss_window": _loss_summary(self.loss_window),
            "skipped_steps": self.skipped,
            "lineage": {
                "packed_dir": str(index.root),
                "packed_tokens_version": self.packed_version,
                "config_sha256": self.cfg.sha256(),
                "tokenizer_sha256": index.tokenizer_sha256,
                "code_version": pretrain.__version__,
                "parent": str(self.parent) if self.parent else None,
                "initialized_from": self.initialized_from,
            },
        }
        losses = [loss for _, loss in self.loss_window]
        self.checkpointer.save(
            model=self.model,
            optimizer=self.optimizer,
            step=self.step,
            meta=meta,
            healthy_reason=healthy_reason(self.cfg.checkpoint, self.step, losses),
        )

    def _on_commit(self, path: Path | str, meta: dict[str, Any]) -> None:
        self.last_checkpoint = path
        window = meta["loss_window"]
        self.events.emit(
            {
                "event": "checkpoint",
                "branch": self.cfg.run.branch,
                "step": meta["step"],
                "key": meta["key"],
                "path": path if isinstance(path, str) else str(path.absolute()),
                "loss": finite_or_none(window["last"]) if window["last"] is not None else None,
                "tokens_seen": meta["tokens_seen"],
                "healthy": ckpt.is_healthy(path),
                "version": meta["identity"],
            }
        )

    def last_loss(self) -> float | None:
        return finite_or_none(self.loss_window[-1][1]) if self.loss_window else None

    def _train_step(self, lr: float) -> Any:
        cfg = self.cfg
        return train_step(
            self.model,
            self.optimizer,
            self.reader,
            lr=lr,
            accum=self.accum,
            micro_batch=cfg.data.micro_batch_size,
            proc=self.proc,
            grad_clip=cfg.optim.grad_clip,
            ignore_index=self.ignore_index,
            z_loss_weight=cfg.optim.z_loss_weight,
            inject_nan=self.step == cfg.run.inject_nan_at_step,
        )

    def one_step(self) -> StepRecord:
        """Advance one step (train it, or consume its batch inside a skip window)."""
        cfg, proc = self.cfg, self.proc
        self.step += 1
        lr = lr_at(self.step, cfg.optim, cfg.run.lr_scale)
        if cfg.run.is_skipped(self.step):
            skipped = self.reader.skip_batch()
            self.skipped.append(self.step)
            return StepRecord(
                step=self.step,
                lr=lr,
                tokens_seen=self.tokens_seen,
                skipped=True,
                skipped_sequences=skipped,
            )
        started = time.perf_counter()
        try:
            out = self._train_step(lr)
        except DataError as exc:  # e.g. a token id >= vocab_size: say which step read it
            raise DataError(f"step {self.step}: {exc}") from exc
        step_time = time.perf_counter() - started
        self.tokens_seen += self.tokens_per_step
        self.loss_window.append((self.step, out.loss))
        tokens_per_s = self.tokens_per_step / step_time
        return StepRecord(
            step=self.step,
            lr=lr,
            tokens_seen=self.tokens_seen,
            loss=out.loss,
            z_loss=out.z_loss,
            grad_norm=out.grad_norm,
            step_time_s=step_time,
            data_wait_s=out.data_wait_s,
            tokens_per_s=tokens_per_s,
            mfu=mfu(self.flops_per_token, tokens_per_s, self.peak_flops, proc.world_size),
            memory_gb=memory_gb(proc.device),
        )

    def run(self, stop: StopFlag, callbacks: list[Callback]) -> TrainResult:
        cfg, proc = self.cfg, self.proc
        seq_tokens = self.index.seq_len - 1
        self.tokens_per_step = cfg.data.global_batch_sequences * seq_tokens
        self.flops_per_token = flops_per_token(cfg.model, seq_tokens)
        self.peak_flops = peak_flops_per_device(proc.device, cfg.metrics.peak_flops_per_device)
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
        for callback in callbacks:
            callback.on_train_start(self)
        stopped_by = None
        self.model.train()
        while self.step < cfg.run.max_steps:
            record = self.one_step()
            for callback in callbacks:
                callback.on_step_end(self, record)
            if agree_to_stop(stop, proc):
                stopped_by = stop.signal_name or "peer_rank"  # another rank got the signal
                break
        for callback in callbacks:
            callback.on_train_end(self, stopped_by)
        if stopped_by is not None:
            self.events.emit(
                {
                    "event": "stopped",
                    "step": self.step,
                    "signal": stopped_by,
                    "checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
                }
            )
        else:
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
            last_checkpoint=self.last_checkpoint,
            stopped_by=stopped_by,
        )


def train(
    cfg: TrainConfig,
    proc: ProcessInfo,
    *,
    events: EventSink,
    metrics: Metrics,
    stop: StopFlag | None = None,
    callbacks: Sequence[Callback] | None = None,
) -> TrainResult:
    """Train ``cfg`` on this process (collective when distributed); returns where it ended.

    ``callbacks`` run after the default ones (metrics, skip events, eval hook, checkpoints)."""
    trainer = Trainer(cfg, proc, events, metrics)
    trainer.restore()
    result = trainer.run(stop or StopFlag(), default_callbacks(trainer) + list(callbacks or []))
    # not in a `finally`: after an error a rank may be gone, and an uncommitted save stays a
    # .tmp- folder rather than becoming a checkpoint
    trainer.checkpointer.close()
    return result
