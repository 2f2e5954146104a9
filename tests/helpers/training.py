"""Shared test helpers (moved from test_train.py); tests import these, never each other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pretrain.checkpoint.checkpointer import save_checkpoint
from pretrain.distributed import ProcessInfo
from pretrain.model.config import ModelConfig
from pretrain.model.recipes import debug_tiny
from pretrain.train.config import TrainConfig, train_config
from pretrain.train.events import EventSink, NullSink
from pretrain.train.loop import TrainResult, train
from pretrain.train.metrics import MetricsLogger
from pretrain.train.optim import build_optimizer
from resources.process_tree import alive

REPO = Path(__file__).resolve().parents[2]


SEQ_LEN, VOCAB = 33, 64


TRAINER_ENV = {
    "OMP_NUM_THREADS": "1",
    "MALLOC_MMAP_THRESHOLD_": "4294967296",
    "MALLOC_TRIM_THRESHOLD_": "17179869184",
    "MALLOC_TOP_PAD_": "1073741824",
}


def make_packed(
    root: Path, *, num_train: int = 64, num_val: int = 8, committed: bool = True
) -> Path:
    """A packed dir in the contract's format; sequences count up with stride 1 or 2 (learnable)."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)

    def sequences(n: int) -> np.ndarray:
        start, stride = rng.integers(3, VOCAB, (n, 1)), rng.integers(1, 3, (n, 1))
        return (3 + (start + stride * np.arange(SEQ_LEN) - 3) % (VOCAB - 3)).astype("<u2")

    sequences(num_train).tofile(root / "train-00000.bin")
    val_files = []
    for source in ("code", "web"):
        sequences(num_val).tofile(root / f"val-{source}-00000.bin")
        val_files.append(
            {"file": f"val-{source}-00000.bin", "num_sequences": num_val, "source": source}
        )
    index = {
        "format": 1,
        "seq_len": SEQ_LEN,
        "vocab_size": VOCAB,
        "dtype": "uint16",
        "eos_id": 0,
        "bos_id": 1,
        "pad_id": 2,
        "tokenizer_sha256": "ab" * 32,
        "splits": {
            "train": {
                "files": [{"file": "train-00000.bin", "num_sequences": num_train, "source": None}],
                "num_sequences": num_train,
                "num_tokens": num_train * SEQ_LEN,
            },
            "val": {
                "files": val_files,
                "num_sequences": 2 * num_val,
                "num_tokens": 2 * num_val * SEQ_LEN,
            },
        },
    }
    (root / "index.json").write_text(json.dumps(index))
    if committed:
        (root / "_COMMITTED").write_text("{}")
    return root


# a small deterministic CPU run with W&B off: what tiny_config sets unless told otherwise
TINY_SETTINGS: dict[str, Any] = {
    "lr": 3e-3,
    "warmup_steps": 3,
    "micro_batch_size": 4,
    "global_batch_sequences": 8,
    "wandb_mode": "disabled",
    "deterministic": True,
}


def tiny_config(
    packed: Path | str,
    run_root: Path | str,
    *,
    max_steps: int,
    model: ModelConfig | None = None,
    **settings: Any,
) -> TrainConfig:
    """A config for ``model`` (default: ``debug_tiny`` at VOCAB, SEQ_LEN) on ``packed``:
    :data:`TINY_SETTINGS`, a checkpoint at ``max_steps``, and ``settings`` (any keyword of
    :func:`pretrain.train.config.train_config`) over them."""
    settings = {**TINY_SETTINGS, "every_steps": max_steps, **settings}
    model = model or debug_tiny(VOCAB, max_seq_len=SEQ_LEN)
    run_root = str(run_root)
    return train_config(
        model, packed_dir=str(packed), run_root=run_root, max_steps=max_steps, **settings
    )


def make_config(
    packed: Path,
    run_root: Path,
    *,
    max_steps: int = 12,
    schedule_steps: int = 12,
    every: int = 4,
    keep_last: int = 5,
    **run: object,
) -> TrainConfig:
    return tiny_config(
        packed,
        run_root,
        max_steps=max_steps,
        schedule_steps=schedule_steps,
        every_steps=every,
        checkpoint={"keep_last": keep_last},
        run=run,
        metrics={"progress_every_steps": 1, "progress_min_interval_s": 0},
    )


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def losses(run_root: Path, branch: str = "b00") -> dict[int, float]:
    rows = read_jsonl(run_root / branch / "metrics.jsonl")
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


def run(cfg: TrainConfig, events: EventSink | None = None) -> TrainResult:
    """One in-process, single-process training run writing metrics.jsonl."""
    metrics = MetricsLogger(cfg)
    try:
        return train(cfg, ProcessInfo(), events=events or NullSink(), metrics=metrics)
    finally:
        metrics.close()


def save_model(
    cfg: TrainConfig,
    model: Any,
    *,
    step: int,
    meta: dict[str, Any],
    optimizer: Any = None,
    proc: ProcessInfo | None = None,
) -> Path:
    """The trainer's save of ``model`` and ``optimizer`` (None: a fresh one for ``cfg.optim``)
    at ``step`` on ``cfg``'s branch, one process unless ``proc`` says otherwise."""
    return save_checkpoint(
        cfg=cfg.checkpoint,
        branch=cfg.run.branch,
        run_config=cfg.to_dict(),
        proc=proc or ProcessInfo(),
        model=model,
        optimizer=build_optimizer(model, cfg.optim) if optimizer is None else optimizer,
        step=step,
        meta=meta,
    )


# -- distributed ----------------------------------------------------------------------------
def torchrun_cmd(config: Path, *extra: str) -> list[str]:
    """The command of a 2-process torchrun (gloo) of the trainer on ``config``."""
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    return [torchrun, "--standalone", "--nproc_per_node=2", "-m", "pretrain.train"] + [
        "--config",
        str(config),
        *extra,
    ]


def run_torchrun(config: Path, *extra: str) -> subprocess.CompletedProcess:
    """The trainer under torchrun to its end (5 minutes at most), output captured, unchecked."""
    return subprocess.run(
        torchrun_cmd(config, *extra),
        cwd=REPO,
        env={**os.environ, **TRAINER_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )


def torchrun(config: Path, *extra: str) -> subprocess.CompletedProcess:
    done = run_torchrun(config, *extra)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def kill_tree(proc: subprocess.Popen, tree: set[int]) -> None:
    """SIGKILL every process of ``tree`` (``proc`` and its workers: a crash, nobody cleans up),
    then wait until all of them are gone (30 s at most each)."""
    for pid in tree:
        os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in tree)
