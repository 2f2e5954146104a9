"""Unit tests for pretrain.packing: token accounting, ledger, per-source val, on-disk contract."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pretrain import storage
from pretrain.errors import DataError
from pretrain.packing import (
    PackedSplit,
    PackingConfig,
    pack_tokens,
    read_packed_index,
    token_dtype,
)
from pretrain.tokenizer import load_tokenizer
from tests.helpers.packing_data import CONFIG, SEQ_LEN, WORDS


@pytest.fixture(scope="module")
def packed(packed_mix):
    return packed_mix


def _val_by_source(packed_dir: Path) -> dict[str, np.ndarray]:
    index = read_packed_index(str(packed_dir))
    return {src: PackedSplit(index, "val", src).all_rows() for src in index.sources("val")}


def _encoded(tmp: Path, split: str) -> list[tuple[dict, list[int]]]:
    """Independent re-encoding of every document of a split, with EOS appended."""
    tok = load_tokenizer(str(tmp / "tok"))
    rows = storage.read_table(str(tmp / "mix" / f"{split}.parquet")).to_pylist()
    return [(r, tok.encode(r["text"], add_special_tokens=False).ids + [1]) for r in rows]


def test_token_accounting(packed):
    tmp, stats = packed
    index = read_packed_index(str(tmp / "out"))
    train = PackedSplit(index, "train").all_rows()
    assert index.dtype == np.dtype("<u2") and train.shape == (stats.sequences["train"], SEQ_LEN)
    for split in ("train", "val"):
        expected = sum(len(ids) for _, ids in _encoded(tmp, split))
        tokens = stats.split_tokens[split]
        assert tokens["tokenized"] == expected
        assert tokens["packed"] + tokens["tail_dropped"] == expected
        assert tokens["packed"] == len(PackedSplit(index, split)) * SEQ_LEN
    assert stats.tokens_tokenized == stats.tokens_packed + stats.tail_tokens_dropped
    assert stats.split_tokens["train"]["tail_dropped"] < SEQ_LEN
    # every document whose EOS lands inside a full sequence contributes exactly one EOS
    ends = np.cumsum([len(ids) for _, ids in _encoded(tmp, "train")])
    assert int((train == index.eos_id).sum()) == int((ends <= train.size).sum())
    assert stats.documents["train"] == len(ends)


def test_ledger_tiles_sequences_and_rebuilds_documents(packed):
    tmp, stats = packed
    train = PackedSplit(read_packed_index(str(tmp / "out")), "train").all_rows()
    ledger = storage.read_table(str(tmp / "out" / "ledger.parquet")).to_pylist()
    ledger = [r for r in ledger if r["split"] == "train"]
    by_seq = defaultdict(list)
    pieces = defaultdict(list)
    for row in ledger:
        by_seq[row["seq_index"]].append((row["token_start"], row["token_end"]))
        tokens = train[row["seq_index"], row["token_start"] : row["token_end"]].tolist()
        pieces[(row["doc_id"], row["epoch"])].append((row["doc_token_offset"], tokens))
    assert sorted(by_seq) == list(range(len(train)))
    for ranges in by_seq.values():
        assert ranges[0][0] == 0 and ranges[-1][1] == SEQ_LEN
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    rebuilt, encoded = 0, _encoded(tmp, "train")
    source_ids = {row["id"]: row["source_id"] for row, _ in encoded}
    assert all(r["source_id"] == source_ids[r["doc_id"]] for r in ledger)  # provenance kept
    assert all(r["source_id"].startswith(r["source"] + ":") for r in ledger)
    for row, ids in encoded:
        parts = sorted(pieces.get((row["id"], row["epoch"]), []))
        tokens = [t for _, part in parts for t in part]
        assert tokens == ids[: len(tokens)]
        rebuilt += len(tokens) == len(ids)
    # exactly the documents that end before the dropped tail are whole in the ledger
    ends = np.cumsum([len(ids) for _, ids in encoded])
    assert rebuilt == int((ends <= train.size).sum()) > stats.documents["train"] - 5


def test_val_is_packed_per_source_in_order(packed):
    tmp, stats = packed
    by_source = _val_by_source(tmp / "out")
    assert set(by_source) == {"web", "code", "cjk"}
    streams = defaultdict(list)
    for row, ids in _encoded(tmp, "val"):
        streams[row["source"]] += ids
    for source, rows in by_source.items():
        assert rows.shape[1] == SEQ_LEN and len(rows) == len(streams[source]) // SEQ_LEN
        assert rows.reshape(-1).tolist() == streams[source][: rows.size]
        assert stats.tokens_per_source[source]["val"] == len(streams[source])
    assert sum(len(v) for v in by_source.values()) == stats.sequences["val"]
    files = storage.read_json(str(tmp / "out" / "index.json"))["splits"]["val"]["files"]
    assert {f["source"] for f in files} == set(by_source)
    assert files[0]["file"].startswith("val-")


def test_index_contract(packed):
    tmp, stats = packed
    index = storage.read_json(str(tmp / "out" / "index.json"))
    assert index["format"] == 1 and index["seq_len"] == SEQ_LEN
    assert index["vocab_size"] == 350 and index["dtype"] == "uint16"
    assert (index["bos_id"], index["eos_id"], index["pad_id"]) == (0, 1, 2)
    assert len(index["tokenizer_sha256"]) == 64
    train = index["splits"]["train"]
    assert train["files"] == [
        {"file": "train-00000.bin", "num_sequences": stats.sequences["train"], "source": None}
    ]
    assert train["num_tokens"] == train["num_sequences"] * SEQ_LEN
    assert index["documents"] == stats.documents
    assert index["tokens_tokenized"] == stats.tokens_tokenized
    size = (tmp / "out" / "train-00000.bin").stat().st_size
    assert size == stats.sequences["train"] * SEQ_LEN * 2


def test_dtype_selection():
    assert token_dtype(4096) == np.dtype("<u2")
    assert token_dtype(65535) == np.dtype("<u2")
    assert token_dtype(65536) == np.dtype("<u4")
    assert token_dtype(128_256).name == "uint32"


def test_rerun_is_byte_identical_and_shards_split(packed):
    tmp, _ = packed
    pack_tokens(str(tmp / "mix"), str(tmp / "tok"), str(tmp / "again"), CONFIG)
    names = sorted(p.name for p in (tmp / "out").iterdir())
    assert names == sorted(p.name for p in (tmp / "again").iterdir())
    for name in names:
        assert (tmp / "out" / name).read_bytes() == (tmp / "again" / name).read_bytes(), name
    small = PackingConfig(seq_len=SEQ_LEN, seed=7, batch_size=50, shard_bytes=SEQ_LEN * 2 * 10)
    pack_tokens(str(tmp / "mix"), str(tmp / "tok"), str(tmp / "small"), small)
    small_index = read_packed_index(str(tmp / "small"))
    assert len(small_index.files("train")) > 1
    assert all(f.num_sequences <= 10 for f in small_index.files("train"))
    full = PackedSplit(read_packed_index(str(tmp / "out")), "train")
    np.testing.assert_array_equal(PackedSplit(small_index, "train").all_rows(), full.all_rows())


def test_uncommitted_or_truncated_dir_is_refused(packed):
    tmp, _ = packed
    broken = tmp / "broken"
    shutil.copytree(tmp / "out", broken)
    (broken / storage.COMMITTED).unlink()
    with pytest.raises(DataError, match="_COMMITTED"):
        read_packed_index(str(broken))
    storage.commit_marker(str(broken))
    (broken / "train-00000.bin").write_bytes(b"\x00\x00")
    with pytest.raises(DataError, match="bytes"):
        PackedSplit(read_packed_index(str(broken)), "train")


def test_too_little_train_text_fails_loudly(tmp_path, packed):
    tmp, _ = packed
    mix = tmp_path / "mix"
    rows = [{"id": "a", "text": "tiny", "source": "web", "epoch": 0}]
    storage.write_table(pa.Table.from_pylist(rows), str(mix / "train.parquet"))
    storage.write_table(pa.Table.from_pylist(rows).drop(["epoch"]), str(mix / "val.parquet"))
    with pytest.raises(DataError, match="fewer than seq_len"):
        pack_tokens(str(mix), str(tmp / "tok"), str(tmp_path / "out"), CONFIG)
    assert not storage.is_committed(str(tmp_path / "out"))


def test_val_source_shorter_than_seq_len_is_kept_empty_and_warned(tmp_path, packed):
    tmp, _ = packed
    mix = tmp_path / "mix"
    train = [
        {"id": f"t{i}", "text": " ".join(WORDS), "source": "web", "epoch": 0} for i in range(20)
    ]
    val = [{"id": "v0", "text": " ".join(WORDS), "source": "web"}] * 10 + [
        {"id": "v1", "text": "short", "source": "rare"}
    ]
    storage.write_table(pa.Table.from_pylist(train), str(mix / "train.parquet"))
    storage.write_table(pa.Table.from_pylist(val), str(mix / "val.parquet"))
    stats = pack_tokens(str(mix), str(tmp / "tok"), str(tmp_path / "out"), CONFIG)
    assert len(stats.warnings) == 1 and "'rare'" in stats.warnings[0]
    by_source = _val_by_source(tmp_path / "out")
    assert by_source["rare"].shape == (0, SEQ_LEN) and len(by_source["web"]) > 0
    assert stats.split_tokens["val"]["tail_dropped"] >= stats.tokens_per_source["rare"]["val"]
