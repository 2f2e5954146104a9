"""The packed-token format: its one definition, and the one reader of it.

Layout of a packed directory (written by :mod:`pretrain.packing.pack`)::

    index.json   {"format": 1, "seq_len": L, "vocab_size": V, "dtype": "uint16"|"uint32",
                  "eos_id", "bos_id", "pad_id", "tokenizer_sha256",
                  "splits": {"train": {"files": [{"file", "num_sequences", "source"}], ...},
                             "val": {...}}}
    *.bin        raw little-endian arrays of shape (num_sequences, L), row-major
    ledger.parquet  the documents in every sequence (:mod:`pretrain.packing.ledger`)
    _COMMITTED   written last; a directory without it is refused

A *view* (``"view": true`` in ``index.json``, written by :mod:`pretrain.experiments.view`) owns
no ``.bin`` files: each file entry names rows ``[first, first + num_sequences)`` of another
packed directory's file (its path relative to the view, or absolute), and an entry may repeat
(a second epoch of that data). Nothing is copied, so a data variant costs one small JSON file.

Token ids must be < ``vocab_size``: a sample of each shard is checked when a split opens and
every sequence when it is read (a ``DataError`` naming the file and row). The order in which
training visits the sequences is :mod:`pretrain.packing.order`.

    index = read_packed_index("artifacts/packed_tokens")   # stages s3:// to this node first
    train = PackedSplit(index, "train")
    batch = train.rows(np.arange(8))                        # (8, L) int64
    code_val = PackedSplit(index, "val", source="code")     # one source's validation sequences
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from pretrain import storage
from pretrain.errors import DataError
from pretrain.packing.staging import stage_packed_dir

FORMAT = 1  # index.json "format": bump when the layout changes
DTYPES: dict[str, np.dtype] = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}


@dataclass(frozen=True, kw_only=True)
class ShardFile:
    path: Path
    num_sequences: int
    source: str | None
    first: int = 0  # a view's entry: the first row of ``path`` it reads


@dataclass(frozen=True, kw_only=True)
class PackedIndex:
    root: Path
    seq_len: int
    vocab_size: int
    dtype: np.dtype
    eos_id: int
    bos_id: int
    pad_id: int
    tokenizer_sha256: str
    splits: dict[str, tuple[ShardFile, ...]]
    view: bool = False  # entries are row ranges of other directories' files
    stages: tuple[tuple[int, int], ...] = ()  # train curriculum: (first_sequence, count)

    def sources(self, split: str) -> list[str]:
        """The sources a split holds files of, in index order (validation is packed per source)."""
        return list(dict.fromkeys(f.source for f in self.files(split) if f.source is not None))

    def files(self, split: str) -> tuple[ShardFile, ...]:
        if split not in self.splits:
            raise DataError(
                f"{self.root}: no '{split}' split in index.json (has {sorted(self.splits)})"
            )
        return self.splits[split]


class PackedShape(NamedTuple):
    """What sizes a model for a packed directory: its context and its vocabulary."""

    seq_len: int
    vocab_size: int


def packed_shape(packed_dir: str) -> PackedShape:
    """``seq_len`` and ``vocab_size`` of a committed packed directory, from its ``index.json``
    read in place: a recipe sizes the model on the orchestrator's machine without copying
    ``s3://`` token shards there (the trainer stages and validates the whole directory)."""
    if not storage.is_committed(packed_dir):
        raise DataError(
            f"{packed_dir} has no {storage.COMMITTED} marker: packing did not finish; rerun "
            "packed_tokens"
        )
    where = storage.join(packed_dir, "index.json")
    try:
        index = json.loads(storage.read_bytes(where))
        if index.get("format") != FORMAT:
            raise DataError(f"{where}: format {index.get('format')!r}, expected {FORMAT}")
        shape = PackedShape(seq_len=int(index["seq_len"]), vocab_size=int(index["vocab_size"]))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DataError(
            f"{where} is missing or violates the packed-token contract: {exc!r}"
        ) from exc
    if shape.seq_len < 2:
        raise DataError(f"{where}: seq_len={shape.seq_len}; need >= 2 (input + shifted target)")
    return shape


def read_packed_index(packed_dir: str) -> PackedIndex:
    """Read and validate ``index.json``; refuses an uncommitted or malformed directory.

    An ``s3://`` directory is first copied to this node's cache (:mod:`pretrain.packing.staging`)."""
    root = storage.local_path(stage_packed_dir(packed_dir))
    if not (root / storage.COMMITTED).exists():
        raise DataError(
            f"{root} has no {storage.COMMITTED} marker: packing did not finish; rerun packed_tokens"
        )
    try:
        index: dict[str, Any] = json.loads((root / "index.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{root}/index.json is missing or not JSON: {exc}") from exc
    if index.get("format") != FORMAT:
        raise DataError(f"{root}: index format {index.get('format')!r}, expected {FORMAT}")
    if index.get("dtype") not in DTYPES:
        raise DataError(f"{root}: dtype {index.get('dtype')!r} is not one of {sorted(DTYPES)}")
    try:
        splits = {
            name: tuple(
                ShardFile(
                    path=root / f["file"],
                    num_sequences=int(f["num_sequences"]),
                    source=f.get("source"),
                    first=int(f.get("first", 0)),
                )
                for f in split["files"]
            )
            for name, split in index["splits"].items()
        }
        packed = PackedIndex(
            root=root,
            seq_len=int(index["seq_len"]),
            vocab_size=int(index["vocab_size"]),
            dtype=DTYPES[index["dtype"]],
            eos_id=int(index["eos_id"]),
            bos_id=int(index["bos_id"]),
            pad_id=int(index["pad_id"]),
            tokenizer_sha256=str(index["tokenizer_sha256"]),
            splits=splits,
            view=bool(index.get("view", False)),
            stages=tuple(
                (int(st["first_sequence"]), int(st["num_sequences"]))
                for st in index["splits"].get("train", {}).get("stages", [])
            ),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{root}/index.json violates the packed-token contract: {exc!r}") from exc
    if packed.seq_len < 2:
        raise DataError(f"{root}: seq_len={packed.seq_len}; need >= 2 (input + shifted target)")
    return packed


SAMPLE_ROWS = 64  # rows per shard file checked when a split is opened


class PackedSplit:
    """Random access to the sequences of one split (optionally one source), memory-mapped."""

    def __init__(self, index: PackedIndex, split: str, source: str | None = None) -> None:
        files = [f for f in index.files(split) if source is None or f.source == source]
        if not files:
            raise DataError(f"{index.root}: split '{split}' has no files for source {source!r}")
        self.seq_len, self.vocab_size = index.seq_len, index.vocab_size
        self.stages = index.stages if split == "train" and source is None else ()
        self._arrays = []
        self._paths = [f.path for f in files if f.num_sequences]
        row_bytes = index.seq_len * index.dtype.itemsize
        for f in files:
            expected = (f.first + f.num_sequences) * row_bytes
            size = f.path.stat().st_size if f.path.exists() else -1
            # a packed file holds exactly its rows; a view's entry reads a range of a longer file
            fits = size >= expected and size % row_bytes == 0 if index.view else size == expected
            if f.first < 0 or not fits:
                raise DataError(
                    f"{f.path}: {size} bytes on disk, index.json promises rows "
                    f"[{f.first}, {f.first + f.num_sequences}) of {row_bytes} bytes; repack"
                )
            if f.num_sequences:
                arr = np.memmap(
                    f.path,
                    dtype=index.dtype,
                    mode="r",
                    offset=f.first * row_bytes,
                    shape=(f.num_sequences, index.seq_len),
                )
                self._arrays.append(arr)
        counts = [len(a) for a in self._arrays]
        self._starts = np.cumsum([0, *counts])
        self.num_sequences = int(self._starts[-1])
        for file_idx, arr in enumerate(self._arrays):  # a sample now; every batch when read
            sample = np.unique(np.linspace(0, len(arr) - 1, min(len(arr), SAMPLE_ROWS)).astype(int))
            self._check_ids(arr[sample], file_idx, sample)

    def _check_ids(self, rows: np.ndarray, file_idx: int, row_numbers: np.ndarray) -> None:
        """Token ids must be < vocab_size (an embedding lookup would fail mid-training)."""
        if rows.size and int(rows.max()) >= self.vocab_size:
            bad = int(np.argmax(rows.max(axis=1) >= self.vocab_size))
            raise DataError(
                f"{self._paths[file_idx]}: sequence {int(row_numbers[bad])} holds token id "
                f"{int(rows[bad].max())} >= vocab_size={self.vocab_size} from index.json; the "
                "shard does not match its tokenizer or is damaged: repack packed_tokens"
            )

    def __len__(self) -> int:
        return self.num_sequences

    def all_rows(self) -> np.ndarray:
        """Every sequence of the split, in the order the shards hold it: (N, seq_len) int64."""
        return self.rows(np.arange(self.num_sequences))

    def locate(self, index: int) -> tuple[int, int]:
        """(shard file, row in it) of global sequence ``index``."""
        file_idx = int(np.searchsorted(self._starts, index, side="right") - 1)
        return file_idx, int(index - self._starts[file_idx])

    def rows(self, indices: np.ndarray) -> np.ndarray:
        """Sequences at global ``indices`` as a (len(indices), seq_len) int64 array."""
        out = np.empty((len(indices), self.seq_len), dtype=np.int64)
        files = np.searchsorted(self._starts, indices, side="right") - 1
        for i, (file_idx, idx) in enumerate(zip(files, indices, strict=True)):
            row = idx - self._starts[file_idx]
            out[i] = self._arrays[file_idx][row]
            if out[i].max() >= self.vocab_size:
                self._check_ids(out[i : i + 1], int(file_idx), np.array([row]))
        return out
