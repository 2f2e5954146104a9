"""``PackedTokens``: memory-mapped access to a committed ``packed_tokens`` directory.

    from pretrain.packing import PackedTokens
    packed = PackedTokens("art/packed_tokens")      # refuses an uncommitted dir
    batch = packed.split("train")[0:8]              # (8, seq_len)
    packed.val_by_source()["code"]                  # validation sequences of one source
    packed.ledger()                                 # the ledger as a pyarrow Table

The trainer has its own reader (``pretrain/train/data.py``) with a resumable cursor; this one
is for analysis, evaluation and tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from pretrain import storage
from pretrain.errors import DataError
from pretrain.packing.config import FORMAT


class PackedTokens:
    """Memory-mapped reader of a committed packed_tokens directory (local paths only)."""

    def __init__(self, dir_path: str | Path) -> None:
        self.path = storage.local_path(str(dir_path))
        if not storage.is_committed(str(self.path)):
            raise DataError(
                f"{self.path} has no {storage.COMMITTED} marker: packing did not finish"
            )
        self.index = storage.read_json(str(self.path / "index.json"))
        if self.index.get("format") != FORMAT:
            raise DataError(f"{self.path}: index format {self.index.get('format')} != {FORMAT}")
        self.seq_len: int = self.index["seq_len"]
        self.vocab_size: int = self.index["vocab_size"]
        self.eos_id: int = self.index["eos_id"]
        self.bos_id: int = self.index["bos_id"]
        self.pad_id: int = self.index["pad_id"]
        self.dtype = np.dtype(self.index["dtype"]).newbyteorder("<")

    def _entries(self, split: str) -> list[dict]:
        if split not in self.index["splits"]:
            raise DataError(f"no split '{split}' in {self.path}; have {list(self.index['splits'])}")
        return self.index["splits"][split]["files"]

    def _open(self, entry: dict) -> np.ndarray:
        file, n = self.path / entry["file"], entry["num_sequences"]
        expected = n * self.seq_len * self.dtype.itemsize
        if not file.exists() or file.stat().st_size != expected:
            raise DataError(f"{file} is missing or not {expected} bytes as index.json says")
        if n == 0:
            return np.empty((0, self.seq_len), self.dtype)
        return np.memmap(file, dtype=self.dtype, mode="r", shape=(n, self.seq_len))

    def split_shards(self, split: str) -> list[np.ndarray]:
        """One memmap per shard file, in order (lazy: nothing is read until indexed)."""
        return [self._open(e) for e in self._entries(split)]

    def split(self, split: str) -> np.ndarray:
        """All sequences of ``split``, shape (N, seq_len); a memmap when it is one file."""
        shards = self.split_shards(split)
        return shards[0] if len(shards) == 1 else np.concatenate(shards)

    def val_by_source(self) -> dict[str, np.ndarray]:
        by_source: dict[str, list[np.ndarray]] = {}
        for entry in self._entries("val"):
            by_source.setdefault(entry["source"], []).append(self._open(entry))
        return {s: a[0] if len(a) == 1 else np.concatenate(a) for s, a in by_source.items()}

    def num_sequences(self, split: str) -> int:
        self._entries(split)
        return int(self.index["splits"][split]["num_sequences"])

    def ledger(self) -> pa.Table:
        return storage.read_table(str(self.path / "ledger.parquet"))
