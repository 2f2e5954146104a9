"""Shared test helpers (moved from test_eval_tasks.py); tests import these, never each other."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, pre_tokenizers, trainers

from pretrain.checkpoint.checkpointer import save_checkpoint
from pretrain.distributed import ProcessInfo
from pretrain.model.config import ModelConfig
from pretrain.tokenizer import DEFAULT_SPECIAL_TOKENS, new_tokenizer
from pretrain.train.config import (
    CheckpointConfig,
    DataConfig,
    MetricsConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from pretrain.train.optim import build_optimizer
from pretrain.train.parallel import build_model

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


def save_random_checkpoint(
    run_root: Path, model_cfg: ModelConfig, tokenizer_sha256: str, seed: int = 0
) -> Path:
    """A committed single-process checkpoint of a randomly initialized model."""
    cfg = TrainConfig(
        model=model_cfg,
        optim=OptimConfig(lr=1e-3, warmup_steps=1, schedule_steps=2),
        data=DataConfig(packed_dir=str(run_root / "unused"), micro_batch_size=1,
                        global_batch_sequences=1),
        checkpoint=CheckpointConfig(run_root=str(run_root), every_steps=1),
        run=RunConfig(max_steps=1),
        metrics=MetricsConfig(wandb_mode="disabled"),
    )  # fmt: skip
    proc = ProcessInfo()
    model = build_model(model_cfg, proc, seed=seed)
    with torch.no_grad():  # norm gains of 1 would hide a swapped norm in a conversion
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(7)))
    return save_checkpoint(
        cfg=cfg.checkpoint,
        branch=cfg.run.branch,
        run_config=cfg.to_dict(),
        proc=proc,
        model=model,
        optimizer=build_optimizer(model, cfg.optim),
        step=1,
        meta={"lineage": {"tokenizer_sha256": tokenizer_sha256}, "tokens_seen": 123},
    )


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
