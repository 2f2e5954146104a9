"""Shared test helpers (moved from test_eval.py); tests import these, never each other."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pretrain.distributed import ProcessInfo
from pretrain.train.config import TrainConfig
from pretrain.train.events import NullSink
from pretrain.train.loop import train
from pretrain.train.metrics import NullMetrics
from tests.helpers.training import tiny_config

SEQ_LEN, VOCAB = 33, 64


def make_packed(root: Path, tokenizer_sha256: str = "ab" * 32) -> Path:
    """Packed dir (contract format): learnable train data; 'code' val is learnable, 'noise' is not."""
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def counting(n: int) -> np.ndarray:
        start = rng.integers(3, VOCAB, (n, 1))
        return (3 + (start + np.arange(SEQ_LEN) - 3) % (VOCAB - 3)).astype("<u2")

    counting(64).tofile(root / "train-00000.bin")
    counting(12).tofile(root / "val-code-00000.bin")
    rng.integers(3, VOCAB, (10, SEQ_LEN)).astype("<u2").tofile(root / "val-noise-00000.bin")
    val = [("val-code-00000.bin", 12, "code"), ("val-noise-00000.bin", 10, "noise")]
    index = {
        "format": 1, "seq_len": SEQ_LEN, "vocab_size": VOCAB, "dtype": "uint16", "eos_id": 0,
        "bos_id": 1, "pad_id": 2, "tokenizer_sha256": tokenizer_sha256,
        "splits": {
            "train": {"files": [{"file": "train-00000.bin", "num_sequences": 64, "source": None}],
                      "num_sequences": 64, "num_tokens": 64 * SEQ_LEN},
            "val": {"files": [{"file": f, "num_sequences": n, "source": s} for f, n, s in val],
                    "num_sequences": 22, "num_tokens": 22 * SEQ_LEN},
        },
    }  # fmt: skip
    (root / "index.json").write_text(json.dumps(index))
    (root / "_COMMITTED").write_text("{}")
    return root


def make_config(packed: Path, run_root: Path, max_steps: int) -> TrainConfig:
    return tiny_config(packed, run_root, max_steps=max_steps, schedule_steps=30, micro_batch_size=8)


def train_checkpoint(packed: Path, run_root: Path, max_steps: int) -> Path:
    """The last checkpoint of :func:`make_config`'s run, trained in process (no events, no
    metrics written)."""
    cfg = make_config(packed, run_root, max_steps=max_steps)
    return train(cfg, ProcessInfo(), events=NullSink(), metrics=NullMetrics()).last_checkpoint
