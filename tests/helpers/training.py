"""Shared test helpers (moved from test_train.py); tests import these, never each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from pretrain.distributed import ProcessInfo
from pretrain.model.recipes import debug_tiny
from pretrain.train.config import (
    CheckpointConfig,
    DataConfig,
    MetricsConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from pretrain.train.events import EventSink, NullSink
from pretrain.train.loop import TrainResult, train
from pretrain.train.metrics import MetricsLogger

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
    return TrainConfig(
        model=debug_tiny(VOCAB, max_seq_len=SEQ_LEN),
        optim=OptimConfig(lr=3e-3, warmup_steps=3, schedule_steps=schedule_steps),
        data=DataConfig(packed_dir=str(packed), micro_batch_size=4, global_batch_sequences=8),
        checkpoint=CheckpointConfig(run_root=str(run_root), every_steps=every, keep_last=keep_last),
        run=RunConfig(max_steps=max_steps, **run),
        metrics=MetricsConfig(
            wandb_mode="disabled", progress_every_steps=1, progress_min_interval_s=0
        ),
        deterministic=True,
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


# -- distributed ----------------------------------------------------------------------------
def torchrun(config: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        str(Path(sys.executable).with_name("torchrun")),
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "pretrain.train",
        "--config",
        str(config),
        *extra,
    ]
    done = subprocess.run(
        cmd,
        cwd=REPO,
        env={**os.environ, **TRAINER_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done
