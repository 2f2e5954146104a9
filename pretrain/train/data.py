"""Reader for packed token shards (the contract written by ``pretrain/packing.py``).

Layout of a packed directory::

    index.json   {"format": 1, "seq_len": L, "vocab_size": V, "dtype": "uint16"|"uint32",
                  "eos_id", "bos_id", "pad_id", "tokenizer_sha256",
                  "splits": {"train": {"files": [{"file", "num_sequences", "source"}], ...},
                             "val": {...}}}
    *.bin        raw little-endian arrays of shape (num_sequences, L), row-major
    _COMMITTED   written last; a directory without it is refused

Order is deterministic: epoch ``e`` visits the train split in the permutation
``np.random.default_rng([seed, e]).permutation(N)`` — or, when ``index.json`` lists several
curriculum stages (``splits.train.stages``), stage ``k``'s block permuted by
``default_rng([seed, e, k])``, blocks in stage order. Each step takes the next
``global_batch_sequences`` of it (an epoch's tail shorter than a batch is dropped), and rank
``r`` of ``W`` reads the r-th contiguous slice of that global batch, sorted. Batch ``b``
(0-based; training step ``b + 1``) is therefore a pure function, :func:`batch_indices`, which
the ledger uses to map a step to its documents.

Resumable state (in every checkpoint's ``meta.json`` as ``data_state``, all integers):
``state_dict()`` is ``epoch`` and ``position`` (the cursor) and ``seed`` (the RNG: permutations
are drawn from ``(seed, epoch[, stage])``, so no generator bytes need saving);
``checkpoint_state()`` adds ``num_sequences``, ``shard``, ``offset`` (the file and row of the
next sequence), which ``load_state_dict`` checks against the data so that a changed packed
directory is refused instead of silently reading other batches. Both forms load. Model input is ``seq[:-1]``,
target ``seq[1:]``. Token ids must be < ``vocab_size``: a sample of each shard is checked when a
split opens and every sequence when it is read (a ``DataError`` naming the file and row).

    index = read_packed_index("artifacts/packed_tokens")
    reader = BatchReader(PackedSplit(index, "train"), global_batch=16, seed=0, rank=0, world_size=2)
    local = reader.next_batch()      # (8, L) uint array: this rank's half of the global batch
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from pretrain import storage
from pretrain.errors import DataError
from pretrain.train.staging import stage_packed_dir

SUPPORTED_FORMAT = 1
DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}


@dataclass(frozen=True, kw_only=True)
class ShardFile:
    path: Path
    num_sequences: int
    source: str | None


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
    stages: tuple[tuple[int, int], ...] = ()  # train curriculum: (first_sequence, count)

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
        if index.get("format") != SUPPORTED_FORMAT:
            raise DataError(f"{where}: format {index.get('format')!r}, expected {SUPPORTED_FORMAT}")
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

    An ``s3://`` directory is first copied to this node's cache (:mod:`pretrain.train.staging`)."""
    root = storage.local_path(stage_packed_dir(packed_dir))
    if not (root / storage.COMMITTED).exists():
        raise DataError(
            f"{root} has no {storage.COMMITTED} marker: packing did not finish; rerun packed_tokens"
        )
    try:
        index: dict[str, Any] = json.loads((root / "index.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{root}/index.json is missing or not JSON: {exc}") from exc
    if index.get("format") != SUPPORTED_FORMAT:
        raise DataError(
            f"{root}: index format {index.get('format')!r}, expected {SUPPORTED_FORMAT}"
        )
    if index.get("dtype") not in DTYPES:
        raise DataError(f"{root}: dtype {index.get('dtype')!r} is not one of {sorted(DTYPES)}")
    try:
        splits = {
            name: tuple(
                ShardFile(
                    path=root / f["file"],
                    num_sequences=int(f["num_sequences"]),
                    source=f.get("source"),
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
        for f in files:
            expected = f.num_sequences * index.seq_len * index.dtype.itemsize
            size = f.path.stat().st_size if f.path.exists() else -1
            if size != expected:
                raise DataError(
                    f"{f.path}: {size} bytes on disk, index.json promises {expected} "
                    f"({f.num_sequences} x {index.seq_len} x {index.dtype.itemsize}); repack"
                )
            if f.num_sequences:
                arr = np.memmap(f.path, dtype=index.dtype, mode="r")
                self._arrays.append(arr.reshape(f.num_sequences, index.seq_len))
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


def epoch_permutation(
    num_sequences: int, stages: tuple[tuple[int, int], ...], seed: int, epoch: int
) -> np.ndarray:
    """The order epoch ``epoch`` visits the sequences in (see the module docstring)."""
    if len(stages) <= 1:
        return np.random.default_rng([seed, epoch]).permutation(num_sequences)
    return np.concatenate(
        [
            first + np.random.default_rng([seed, epoch, k]).permutation(count)
            for k, (first, count) in enumerate(stages)
        ]
    )


def batch_indices(
    num_sequences: int,
    stages: tuple[tuple[int, int], ...],
    *,
    global_batch: int,
    seed: int,
    batch: int,
) -> np.ndarray:
    """Sequence indices of global batch ``batch`` (0-based; training step ``batch + 1``)."""
    per_epoch = num_sequences // global_batch
    epoch, position = divmod(batch, per_epoch)
    perm = epoch_permutation(num_sequences, stages, seed, epoch)
    return perm[position * global_batch : (position + 1) * global_batch]


class BatchReader:
    """Deterministic global-batch stream over a split with a two-integer resumable state."""

    def __init__(
        self, split: PackedSplit, *, global_batch: int, seed: int, rank: int, world_size: int
    ) -> None:
        if len(split) < global_batch:
            raise DataError(
                f"train split has {len(split)} sequences, fewer than one global batch "
                f"({global_batch}); pack more data or lower data.global_batch_sequences"
            )
        if global_batch % world_size:
            raise DataError(f"global batch {global_batch} not divisible by world size {world_size}")
        self.split, self.global_batch, self.seed = split, global_batch, seed
        self.rank, self.world_size = rank, world_size
        self.epoch, self.position = 0, 0
        self._perm_epoch, self._perm = -1, np.empty(0, dtype=np.int64)

    def _permutation(self) -> np.ndarray:
        if self._perm_epoch != self.epoch:
            self._perm = epoch_permutation(
                len(self.split), self.split.stages, self.seed, self.epoch
            )
            self._perm_epoch = self.epoch
        return self._perm

    def _next_cursor(self) -> tuple[int, int]:
        """(epoch, position) of the next batch, after wrapping a short epoch tail."""
        if self.position + self.global_batch > len(self.split):
            return self.epoch + 1, 0
        return self.epoch, self.position

    def _advance(self) -> np.ndarray:
        """Global-batch indices of the next step, moving the cursor past them."""
        self.epoch, self.position = self._next_cursor()
        batch = self._permutation()[self.position : self.position + self.global_batch]
        self.position += self.global_batch
        return batch

    def next_batch(self) -> np.ndarray:
        """This rank's slice of the next global batch: (global_batch / world_size, seq_len)."""
        batch = self._advance()
        per_rank = self.global_batch // self.world_size
        return self.split.rows(np.sort(batch[self.rank * per_rank : (self.rank + 1) * per_rank]))

    def skip_batch(self) -> int:
        """Consume the next global batch without reading it; returns the sequences skipped."""
        return len(self._advance())

    def _next_location(self, epoch: int, position: int) -> tuple[int, int]:
        """(shard, offset) of the next sequence to read from cursor (epoch, position)."""
        saved = (self.epoch, self.position)
        self.epoch, self.position = epoch, position
        epoch, position = self._next_cursor()
        self.epoch = epoch
        location = self.split.locate(int(self._permutation()[position]))
        self.epoch, self.position = saved
        return location

    def state_dict(self) -> dict[str, int]:
        """The cursor: epoch, position and seed (the RNG: permutations derive from it)."""
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed}

    def checkpoint_state(self) -> dict[str, int]:
        """``state_dict()`` plus what a resume verifies: num_sequences and the shard and
        row (``offset``) of the next sequence; all integers, as ``meta.json`` stores them."""
        shard, offset = self._next_location(self.epoch, self.position)
        return {
            **self.state_dict(),
            "num_sequences": len(self.split),
            "shard": shard,
            "offset": offset,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("seed", self.seed) != self.seed:
            raise DataError(
                f"checkpoint data seed {state['seed']} != config data.seed {self.seed}; resuming "
                "with another seed would replay a different order — keep the checkpoint's seed"
            )
        if state.get("num_sequences", len(self.split)) != len(self.split):
            raise DataError(
                f"checkpoint was trained on {state['num_sequences']} train sequences, this "
                f"packed directory has {len(self.split)}; resume with the packed_tokens the "
                "run started with (its path is in the checkpoint's config)"
            )
        epoch, position = int(state["epoch"]), int(state["position"])
        if "shard" in state:
            expected = (int(state["shard"]), int(state["offset"]))
            if self._next_location(epoch, position) != expected:
                raise DataError(
                    f"checkpoint's next sequence is shard {expected[0]} row {expected[1]}, but "
                    "this packed directory orders sequences differently; repacked data cannot "
                    "resume a run exactly — resume with the original packed_tokens"
                )
        self.epoch, self.position = epoch, position
