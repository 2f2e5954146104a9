"""The trainer's resumable reader: state through a checkpoint-like JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pretrain.errors import DataError
from pretrain.packing.format import PackedSplit, read_packed_index
from pretrain.packing.order import BatchReader, batch_indices


@pytest.fixture(scope="module")
def packed(packed_stages):
    return packed_stages


def _reader(out, rank=0, world_size=1):
    split = PackedSplit(read_packed_index(out), "train")
    return BatchReader(split, global_batch=4, seed=11, rank=rank, world_size=world_size)


@pytest.mark.parametrize("stop", [1, 7, 20])  # 20 batches cross an epoch boundary
def test_resume_from_saved_state_reads_the_same_batches(packed, stop):
    out = str(packed[0] / "out")
    straight = _reader(out)
    expected = [straight.next_batch() for _ in range(30)]
    first = _reader(out)
    for _ in range(stop):
        first.next_batch()
    state = json.loads(json.dumps(first.checkpoint_state()))  # as meta.json stores it
    assert set(state) == {"epoch", "position", "seed", "num_sequences", "shard", "offset"}
    assert all(isinstance(v, int) for v in state.values())
    resumed = _reader(out)
    resumed.load_state_dict(state)
    for got, want in zip(
        [resumed.next_batch() for _ in range(30 - stop)], expected[stop:], strict=True
    ):
        np.testing.assert_array_equal(got, want)


def test_state_is_the_pure_batch_function(packed):
    out = str(packed[0] / "out")
    reader = _reader(out)
    split = reader.split
    for b in range(25):
        want = batch_indices(len(split), split.stages, global_batch=4, seed=11, batch=b)
        np.testing.assert_array_equal(reader.split.rows(np.sort(want)), reader.next_batch())
    assert reader.checkpoint_state()["epoch"] == 25 // (len(split) // 4)


def test_old_states_load_and_changed_data_is_refused(packed):
    out = str(packed[0] / "out")
    reader = _reader(out)
    reader.load_state_dict({"epoch": 1, "position": 8, "seed": 11})  # cursor-only state
    assert reader.state_dict() == {"epoch": 1, "position": 8, "seed": 11}
    state = reader.checkpoint_state()
    with pytest.raises(DataError, match="train sequences"):
        _reader(out).load_state_dict({**state, "num_sequences": state["num_sequences"] + 1})
    with pytest.raises(DataError, match="orders sequences differently"):
        _reader(out).load_state_dict({**state, "offset": state["offset"] + 1})
    with pytest.raises(DataError, match="seed"):
        _reader(out).load_state_dict({**state, "seed": 12})
