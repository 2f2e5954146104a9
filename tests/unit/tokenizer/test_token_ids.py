"""Token ids >= vocab_size are caught with the file named (issue 19 item 15): at packing (the
document named) and when the trainer reads a shard (a sample at open, every batch when read),
instead of an IndexError in the embedding mid-training.

    .venv/bin/pytest -q tests/unit/tokenizer/test_token_ids.py     # ~20 s on 2 cores
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pretrain.errors import DataError
from pretrain.packing import pack_tokens
from pretrain.packing.format import SAMPLE_ROWS, PackedSplit, read_packed_index
from pretrain.packing.order import BatchReader
from pretrain.tokenizer import load_tokenizer
from tests.helpers.packing_data import CONFIG, WORDS
from tests.helpers.training import VOCAB, make_config, make_packed, run


def test_packing_refuses_a_tokenizer_whose_ids_exceed_its_vocab_size(
    packed_mix: tuple[Path, object],
    tmp_path: Path,
) -> None:
    tmp, _ = packed_mix
    shutil.copytree(tmp / "tok", tmp_path / "tok")
    tok_file = tmp_path / "tok" / "tokenizer.json"
    tok = load_tokenizer(str(tok_file))
    token = tok.id_to_token(tok.encode(WORDS[0], add_special_tokens=False).ids[0])
    data = json.loads(tok_file.read_text())
    data["model"]["vocab"][token] = 5000  # a gap in the ids: get_vocab_size() stays the same
    tok_file.write_text(json.dumps(data))
    assert load_tokenizer(str(tok_file)).get_vocab_size() == tok.get_vocab_size() < 5000
    with pytest.raises(DataError, match=r"train.parquet: document '[0-9a-f]+' encodes to token id 5000 >= the tokenizer's vocab_size=\d+"):  # fmt: skip
        pack_tokens(str(tmp / "mix"), str(tmp_path / "tok"), str(tmp_path / "out"), CONFIG)


def plant(packed: Path, row: int, token: int) -> None:
    shard = np.memmap(packed / "train-00000.bin", dtype="<u2", mode="r+")
    shard[row * 33 + 5] = token  # SEQ_LEN = 33 in tests.unit.train.test_train
    shard.flush()


def test_a_sampled_row_is_caught_when_the_split_opens(tmp_path: Path) -> None:
    packed = make_packed(tmp_path / "packed")
    plant(packed, row=0, token=VOCAB + 6)
    with pytest.raises(DataError, match=rf"train-00000.bin: sequence 0 holds token id {VOCAB + 6} >= vocab_size={VOCAB}"):  # fmt: skip
        PackedSplit(read_packed_index(str(packed)), "train")


@pytest.mark.slow
def test_an_unsampled_row_is_caught_when_read_with_the_step_named(tmp_path: Path) -> None:
    num_train = 200
    packed = make_packed(tmp_path / "packed", num_train=num_train)
    sampled = set(np.linspace(0, num_train - 1, SAMPLE_ROWS).astype(int).tolist())
    row = next(r for r in range(1, num_train) if r not in sampled)
    plant(packed, row=row, token=65535)
    split = PackedSplit(read_packed_index(str(packed)), "train")  # the sample misses it
    reader = BatchReader(split, global_batch=8, seed=0, rank=0, world_size=1)
    with pytest.raises(DataError, match=f"sequence {row} holds token id 65535"):
        for _ in range(num_train // 8):
            reader.next_batch()
    steps = num_train // 8
    cfg = make_config(packed, tmp_path / "runs", max_steps=steps, schedule_steps=steps, every=steps)
    with pytest.raises(DataError, match=rf"^step \d+: .*train-00000.bin: sequence {row} holds"):
        run(cfg)
