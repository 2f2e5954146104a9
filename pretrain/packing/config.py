"""Packing configuration, stats and the token dtype rule.

from pretrain.packing import PackingConfig
PackingConfig(seq_len=2048, seed=0, num_workers=8)   # 8 tokenizer processes
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from pretrain.errors import ConfigError
from pretrain.settings import check_types


@dataclass(frozen=True, kw_only=True)
class PackingConfig:
    """Sequence length, shuffle seed, encode batch size, shard size and tokenizer processes.

    ``num_workers=1`` encodes in this process (``tokenizers`` then uses its own thread pool,
    sized by ``RAYON_NUM_THREADS``); ``num_workers=N > 1`` starts N spawned processes that each
    encode one batch at a time on one thread, with at most ``2 * N`` batches in flight, so
    memory stays bounded however large the corpus is."""

    seq_len: int = 256
    seed: int = 0
    batch_size: int = 512  # documents per encode_batch call
    shard_bytes: int = 64 * 2**20
    num_workers: int = 1

    def __post_init__(self) -> None:
        check_types(self)
        if self.seq_len < 2:
            raise ConfigError(f"PackingConfig.seq_len={self.seq_len} must be >= 2, e.g. 2048")
        if self.batch_size < 1:
            raise ConfigError("PackingConfig.batch_size must be >= 1 (documents per batch)")
        if self.shard_bytes < 1:
            raise ConfigError("PackingConfig.shard_bytes must be > 0, e.g. 64 * 2**20")
        if not 1 <= self.num_workers <= 256:
            raise ConfigError(
                f"PackingConfig.num_workers={self.num_workers} must be in [1, 256]; use the "
                "number of CPU cores to spare"
            )


@dataclass(frozen=True, kw_only=True)
class PackingStats:
    seq_len: int
    vocab_size: int
    dtype: str
    documents: dict[str, int]
    sequences: dict[str, int]
    tokens_tokenized: int
    tokens_packed: int
    tail_tokens_dropped: int
    split_tokens: dict[str, dict[str, int]]  # split -> tokenized / packed / tail_dropped
    tokens_per_source: dict[str, dict[str, int]]  # source -> split -> tokens tokenized
    docs_with_special_text: int
    stages: list[dict] = field(default_factory=list)  # name, first_sequence, num_sequences
    warnings: tuple[str, ...] = field(default=())

    def as_metadata(self) -> dict:
        flat = {k: v for k, v in asdict(self).items() if k not in ("documents", "sequences")}
        for split in ("train", "val"):
            flat[f"{split}_documents"] = self.documents[split]
            flat[f"{split}_sequences"] = self.sequences[split]
        return {**flat, "warnings": "\n".join(self.warnings)}


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab < 65536), else uint32; always little-endian."""
    if vocab_size < 2**16:
        return np.dtype("<u2")
    if vocab_size < 2**32:
        return np.dtype("<u4")
    raise ConfigError(f"vocab_size={vocab_size} does not fit uint32 token ids")
