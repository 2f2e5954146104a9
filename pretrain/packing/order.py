"""The order training visits packed sequences in, and its resumable reader.

Epoch ``e`` visits the train split in the permutation
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
directory is refused instead of silently reading other batches. Both forms load. Model input
is ``seq[:-1]``, target ``seq[1:]``.

    index = read_packed_index("artifacts/packed_tokens")
    reader = BatchReader(PackedSplit(index, "train"), global_batch=16, seed=0, rank=0, world_size=2)
    local = reader.next_batch()      # (8, L) uint array: this rank's half of the global batch
"""

from __future__ import annotations

import numpy as np

from pretrain.errors import DataError
from pretrain.packing.format import PackedSplit


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
