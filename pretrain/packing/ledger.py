"""From training steps to documents and back: the step / micro-batch ledger.

``ledger.parquet`` maps each packed train sequence to its document pieces; the trainer's reader
(:mod:`pretrain.packing.order`) maps each step to sequences with a pure function of the data seed
and the batch shape. Together they answer "what was in step S?" and "which token ranges does a
skip window cover?":

    from pretrain.packing import BatchPlan, steps_for_token_ranges, trace_steps, window_token_ranges
    plan = BatchPlan(global_batch=16, micro_batch=4, world_size=2, seed=0)   # = the run's data config
    spike = trace_steps("art/packed_tokens", plan, [1200])
    spike.group_by("source").aggregate([("tokens", "sum")])     # which sources fed the spike
    ranges = window_token_ranges("art/packed_tokens", plan, 1195, 1205)  # [(start, end), ...]
    steps_for_token_ranges("art/packed_tokens", plan, ranges, max_step=5000)  # back to steps

Token ranges are offsets in the train token stream as the shards hold it: sequence ``i``
covers ``[i * seq_len, (i + 1) * seq_len)``. Steps are 1-based as in the trainer: step ``s``
reads global batch ``s - 1``, whether it trains on it or skips it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.errors import ConfigError, DataError
from pretrain.packing.format import read_packed_index
from pretrain.packing.order import batch_indices, epoch_permutation


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    """The batch shape and data seed of a run (``TrainConfig.data`` and the world size)."""

    global_batch: int
    micro_batch: int
    world_size: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        per_rank, rest = divmod(self.global_batch, self.world_size * self.micro_batch)
        if rest or per_rank < 1:
            raise ConfigError(
                f"BatchPlan: global_batch={self.global_batch} must be a positive multiple of "
                f"world_size × micro_batch = {self.world_size * self.micro_batch}"
            )


def _train_layout(packed_dir: str) -> tuple[int, tuple[tuple[int, int], ...], int]:
    index = read_packed_index(packed_dir)
    num = sum(f.num_sequences for f in index.files("train"))
    return num, index.stages, index.seq_len


def step_sequences(packed_dir: str, plan: BatchPlan, steps: list[int]) -> pa.Table:
    """One row per sequence read at each step: step, rank, micro_batch, seq_index."""
    num, stages, _ = _train_layout(packed_dir)
    if num < plan.global_batch:
        raise DataError(f"{packed_dir}: {num} train sequences < one global batch")
    per_rank = plan.global_batch // plan.world_size
    cols: dict[str, list] = {"step": [], "rank": [], "micro_batch": [], "seq_index": []}
    for step in steps:
        if step < 1:
            raise ConfigError(f"steps are 1-based; got {step}")
        batch = batch_indices(
            num, stages, global_batch=plan.global_batch, seed=plan.seed, batch=step - 1
        )
        for rank in range(plan.world_size):
            local = np.sort(batch[rank * per_rank : (rank + 1) * per_rank])  # as the reader does
            cols["step"] += [step] * per_rank
            cols["rank"] += [rank] * per_rank
            cols["micro_batch"] += (np.arange(per_rank) // plan.micro_batch).tolist()
            cols["seq_index"] += local.tolist()
    types = {"step": pa.int64(), "rank": pa.int32(), "micro_batch": pa.int32()}
    return pa.table({k: pa.array(v, types.get(k, pa.int64())) for k, v in cols.items()})


def trace_steps(packed_dir: str, plan: BatchPlan, steps: list[int]) -> pa.Table:
    """Ledger rows of every document piece read at ``steps``, with step, rank, micro_batch,
    tokens and the piece's global token range (``global_token_start``/``_end``)."""
    plan_table = step_sequences(packed_dir, plan, steps)
    seq_len = _train_layout(packed_dir)[2]
    wanted = pa.array(sorted(set(plan_table["seq_index"].to_pylist())), pa.int64())
    ledger = pq.read_table(
        storage.local_path(storage.join(packed_dir, "ledger.parquet")),
        filters=(pc.field("split") == "train") & pc.field("seq_index").isin(wanted),
    )
    joined = plan_table.join(ledger, keys="seq_index", join_type="inner")
    tokens = pc.subtract(joined["token_end"], joined["token_start"])
    start = pc.add(
        pc.multiply(joined["seq_index"], seq_len), joined["token_start"].cast(pa.int64())
    )
    joined = joined.append_column("tokens", tokens.cast(pa.int64()))
    joined = joined.append_column("global_token_start", start)
    joined = joined.append_column("global_token_end", pc.add(start, joined["tokens"]))
    order = [("step", "ascending"), ("rank", "ascending"), ("seq_index", "ascending")]
    return joined.sort_by([*order, ("token_start", "ascending")])


def window_token_ranges(
    packed_dir: str, plan: BatchPlan, start_step: int, end_step: int
) -> list[tuple[int, int]]:
    """Merged train-stream token ranges read by steps ``[start_step, end_step)``."""
    if not 1 <= start_step < end_step:
        raise ConfigError(f"need 1 <= start_step < end_step, got [{start_step}, {end_step})")
    seq_len = _train_layout(packed_dir)[2]
    seqs = step_sequences(packed_dir, plan, list(range(start_step, end_step)))
    ranges: list[tuple[int, int]] = []
    for seq in sorted(set(seqs["seq_index"].to_pylist())):
        lo = seq * seq_len
        if ranges and ranges[-1][1] == lo:
            ranges[-1] = (ranges[-1][0], lo + seq_len)
        else:
            ranges.append((lo, lo + seq_len))
    return ranges


def steps_for_token_ranges(
    packed_dir: str, plan: BatchPlan, ranges: list[tuple[int, int]], max_step: int
) -> list[int]:
    """Steps ``<= max_step`` whose batch contains a token of any ``[start, end)`` range —
    a skip window given as token ranges, turned into the steps ``run.skip_windows`` takes."""
    num, stages, seq_len = _train_layout(packed_dir)
    hit = np.zeros(num, dtype=bool)
    for start, end in ranges:
        if not 0 <= start < end:
            raise ConfigError(f"token range ({start}, {end}) must satisfy 0 <= start < end")
        hit[start // seq_len : min(num, -(-end // seq_len))] = True
    seqs = np.nonzero(hit)[0]
    per_epoch = num // plan.global_batch
    steps: set[int] = set()
    for epoch in range(-(-max_step // per_epoch)):
        perm = epoch_permutation(num, stages, plan.seed, epoch)
        where = np.empty(num, dtype=np.int64)
        where[perm] = np.arange(num)
        batch = where[seqs] // plan.global_batch
        batch = batch[batch < per_epoch]  # the epoch tail is never read
        steps.update((epoch * per_epoch + batch + 1).tolist())
    return sorted(s for s in steps if s <= max_step)
