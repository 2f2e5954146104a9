"""Packing with curriculum stages and worker processes; the step / micro-batch ledger."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from pretrain import storage, verify
from pretrain.packing import (
    PackingConfig,
    pack_tokens,
    steps_for_token_ranges,
    trace_steps,
    window_token_ranges,
)
from pretrain.packing.format import PackedSplit, read_packed_index
from pretrain.packing.order import BatchReader
from tests.helpers.packing_data import STAGES_PLAN as PLAN
from tests.helpers.packing_data import STAGES_SEQ_LEN as SEQ_LEN


@pytest.fixture(scope="module")
def packed(packed_stages):
    return packed_stages


def test_workers_give_byte_identical_output(packed):
    tmp, _ = packed
    two = PackingConfig(seq_len=SEQ_LEN, seed=3, batch_size=40, num_workers=2)
    pack_tokens(str(tmp / "mix"), str(tmp / "tok"), str(tmp / "two"), two)
    names = sorted(p.name for p in (tmp / "out").iterdir())
    assert names == sorted(p.name for p in (tmp / "two").iterdir())
    for name in names:
        assert (tmp / "out" / name).read_bytes() == (tmp / "two" / name).read_bytes(), name


def test_stages_are_contiguous_and_read_in_order(packed):
    tmp, stats = packed
    index = storage.read_json(str(tmp / "out" / "index.json"))
    stages = index["splits"]["train"]["stages"]
    assert [s["name"] for s in stages] == ["main", "anneal"] == [s["name"] for s in stats.stages]
    assert stages[1]["first_sequence"] == stages[0]["num_sequences"]
    assert sum(s["num_sequences"] for s in stages) == index["splits"]["train"]["num_sequences"]
    ledger = storage.read_table(str(tmp / "out" / "ledger.parquet"))
    train = ledger.filter(pc.equal(ledger["split"], "train")).to_pylist()
    for row in train:  # every sequence holds documents of its own stage only
        assert (row["seq_index"] >= stages[1]["first_sequence"]) == (row["stage"] == 1)
    books = [r for r in train if r["source"] == "books"]
    assert sum(r["stage"] == 1 for r in books) > sum(r["stage"] == 1 for r in train) * 0.8
    split = PackedSplit(read_packed_index(str(tmp / "out")), "train")
    reader = BatchReader(split, global_batch=4, seed=0, rank=0, world_size=1)
    first = np.concatenate([reader._advance() for _ in range(split.num_sequences // 4)])
    boundary = stages[0]["num_sequences"]
    assert sorted(first[:boundary].tolist()) == list(range(boundary))  # stage 0, shuffled
    assert first[:boundary].tolist() != list(range(boundary))
    assert verify.ledger_matches_tokens(str(tmp / "out")).passed


def test_trace_steps_matches_what_the_reader_reads(packed):
    tmp, _ = packed
    out = str(tmp / "out")
    split = PackedSplit(read_packed_index(out), "train")
    per_rank = PLAN.global_batch // PLAN.world_size
    readers = [BatchReader(split, global_batch=8, seed=5, rank=r, world_size=2) for r in (0, 1)]
    steps = [1, 2, split.num_sequences // 8 + 1]  # the last one is in epoch 1
    traced = trace_steps(out, PLAN, steps)
    for step in range(1, steps[-1] + 1):
        batches = [reader.next_batch() for reader in readers]
        if step not in steps:
            continue
        rows = traced.filter(pc.equal(traced["step"], step)).to_pylist()
        for rank, batch in enumerate(batches):
            mine = [r for r in rows if r["rank"] == rank]
            seqs = sorted({r["seq_index"] for r in mine})
            assert len(seqs) == per_rank
            assert np.array_equal(split.rows(np.array(seqs)), batch)
            assert sorted({r["micro_batch"] for r in mine}) == [0, 1]
            assert sum(r["tokens"] for r in mine) == per_rank * SEQ_LEN
    row = traced.to_pylist()[0]
    assert row["global_token_end"] - row["global_token_start"] == row["tokens"]
    assert {"doc_id", "source", "epoch", "stage"} <= set(traced.column_names)


def test_skip_window_token_ranges_round_trip(packed):
    tmp, _ = packed
    out = str(tmp / "out")
    ranges = window_token_ranges(out, PLAN, 3, 5)
    assert sum(b - a for a, b in ranges) == 2 * PLAN.global_batch * SEQ_LEN
    assert all(a % SEQ_LEN == 0 and b % SEQ_LEN == 0 for a, b in ranges)
    assert steps_for_token_ranges(out, PLAN, ranges, max_step=4) == [3, 4]
    # one token inside a sequence is enough to name its step
    a, _ = ranges[0]
    assert steps_for_token_ranges(out, PLAN, [(a + 5, a + 6)], max_step=4) in ([3], [4])
