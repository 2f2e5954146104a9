"""Shared test helpers (moved from test_eval_tasks.py); tests import these, never each other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer, pre_tokenizers, trainers

from pretrain.distributed import ProcessInfo
from pretrain.model.config import ModelConfig
from pretrain.tokenizer import DEFAULT_SPECIAL_TOKENS, new_tokenizer
from pretrain.train.config import TrainConfig
from pretrain.train.parallel import build_model
from tests.helpers.training import save_model, tiny_config

TEXT = (
    "The quick brown fox jumps over the lazy dog. A student asked which question helps. "
    "Who should Derek hug after shocking Richard? She bends down and grabs the pole. "
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n"
    "import os\nimport sys\nfor line in sys.stdin:\n    print(line.strip())\n"
)


SEQ_LEN = 48


def train_tiny_tokenizer(folder: Path, vocab_size: int = 300) -> tuple[Path, Tokenizer]:
    """A byte-level BPE tokenizer like ``pretrain.tokenizer`` trains, saved as tokenizer.json."""
    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(DEFAULT_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([TEXT] * 20, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(tok.to_str())
    return folder, tok


def tiny_model_config(vocab_size: int, **overrides: object) -> ModelConfig:
    base = dict(vocab_size=vocab_size, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                max_seq_len=SEQ_LEN, ffn_multiple_of=16, tie_embeddings=True)  # fmt: skip
    return ModelConfig(**{**base, **overrides})


def checkpoint_config(
    model_cfg: ModelConfig,
    run_root: Path | str,
    *,
    max_steps: int = 1,
    schedule_steps: int = 2,
    packed_dir: str | None = None,
    **checkpoint: Any,
) -> TrainConfig:
    """A config for saving checkpoints of ``model_cfg`` without training (batches of one
    sequence, a checkpoint every step; ``checkpoint``: more CheckpointConfig fields)."""
    return tiny_config(
        packed_dir or Path(run_root) / "unused",
        run_root,
        model=model_cfg,
        max_steps=max_steps,
        schedule_steps=schedule_steps,
        lr=1e-3,
        warmup_steps=1,
        micro_batch_size=1,
        global_batch_sequences=1,
        every_steps=1,
        deterministic=False,
        checkpoint=checkpoint,
    )


def save_random_checkpoint(
    run_root: Path, model_cfg: ModelConfig, tokenizer_sha256: str, seed: int = 0
) -> Path:
    """A committed single-process checkpoint of a randomly initialized model."""
    cfg = checkpoint_config(model_cfg, run_root)
    proc = ProcessInfo()
    model = build_model(model_cfg, proc, seed=seed)
    with torch.no_grad():  # norm gains of 1 would hide a swapped norm in a conversion
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(7)))
    meta = {"lineage": {"tokenizer_sha256": tokenizer_sha256}, "tokens_seen": 123}
    return save_model(cfg, model, step=1, meta=meta, proc=proc)


def pack_val(root: Path, tok: Tokenizer, tokenizer_sha256: str) -> Path:
    """A packed dir whose val split is ``TEXT`` tokenized (EOS after each document)."""
    root.mkdir(parents=True)
    ids = (tok.encode(TEXT).ids + [1]) * 4
    rows = np.array(ids[: len(ids) // SEQ_LEN * SEQ_LEN], dtype="<u2").reshape(-1, SEQ_LEN)
    rows.tofile(root / "val-prose-00000.bin")
    rows[:2].tofile(root / "train-00000.bin")
    (root / "val-license-00000.bin").write_bytes(b"")  # a source whose val docs were too short
    index = {
        "format": 1, "seq_len": SEQ_LEN, "vocab_size": tok.get_vocab_size(), "dtype": "uint16",
        "eos_id": 1, "bos_id": 0, "pad_id": 2, "tokenizer_sha256": tokenizer_sha256,
        "splits": {
            "train": {"files": [{"file": "train-00000.bin", "num_sequences": 2, "source": None}]},
            "val": {"files": [{"file": "val-prose-00000.bin", "num_sequences": len(rows),
                               "source": "prose"},
                              {"file": "val-license-00000.bin", "num_sequences": 0,
                               "source": "license"}]},
        },
    }  # fmt: skip
    (root / "index.json").write_text(json.dumps(index))
    (root / "_COMMITTED").write_text("{}")
    return root


def random_model_and_val(root: Path, tok: Tokenizer, tokenizer_sha256: str) -> tuple[Path, Path]:
    """(packed dir, checkpoint) under ``root``: :func:`pack_val`'s val split and a random tiny
    model's checkpoint for ``tok``'s vocabulary."""
    packed = pack_val(root / "packed", tok, tokenizer_sha256)
    model_cfg = tiny_model_config(tok.get_vocab_size())
    return packed, save_random_checkpoint(root / "runs", model_cfg, tokenizer_sha256)
