"""Streaming Parquet: bounded row groups out, fixed-size batches in, nothing half-written.

The raw and filter stages hold one batch / one row group, not the shard (see
``bench/filter_memory.py``); these tests pin the pieces that make that true.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain import storage
from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.data.readers import RawFile
from pretrain.data.schema import DOCUMENT_SCHEMA

SCHEMA = pa.schema([("i", pa.int64()), ("text", pa.string())])


def test_writer_bounds_row_groups_by_rows_and_bytes(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.parquet")
    rows = [{"i": i, "text": "x" * (1000 if i % 10 == 0 else 10)} for i in range(1000)]
    with storage.StreamingTableWriter(uri, SCHEMA, row_group_rows=64, row_group_bytes=2000) as w:
        w.write_rows(rows[:500])
        w.flush()  # an explicit flush ends a row group early
        w.write_rows(rows[500:])
        assert w.rows == 1000
    meta = pq.ParquetFile(uri).metadata
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    assert sum(sizes) == 1000 and max(sizes) <= 64
    start = 0
    for size in sizes:  # ~2000 characters of text at most: one long row ends a group
        chars = sum(len(r["text"]) for r in rows[start : start + size])
        assert chars < 2000 + 1000 + 64 * 10
        start += size
    assert pq.read_table(uri).to_pylist() == rows


def test_writer_leaves_nothing_visible_on_error(tmp_path: Path) -> None:
    uri = tmp_path / "t.parquet"
    with pytest.raises(RuntimeError), storage.StreamingTableWriter(str(uri), SCHEMA) as w:
        w.write_rows([{"i": 1, "text": "a"}] * 5000)  # one full row group written already
        raise RuntimeError("crash mid-shard")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("group", [1, 7, 256, 300])
def test_batches_have_batch_size_rows_across_row_groups(tmp_path: Path, group: int) -> None:
    table = pa.table({"i": range(1000), "text": [str(i) for i in range(1000)]})
    uri = str(tmp_path / "t.parquet")
    pq.write_table(table, uri, row_group_size=group)
    batches = list(storage.iter_table_batches(uri, batch_size=256))
    assert [b.num_rows for b in batches] == [256, 256, 256, 232]
    assert pa.Table.from_batches(batches).equals(table)


def test_raw_shard_streams_in_bounded_row_groups(tmp_path: Path) -> None:
    src = tmp_path / "docs.jsonl"
    lines = [{"text": f"document {i} " + "word " * 300, "url": f"u{i}"} for i in range(3000)]
    lines.append(lines[5])  # a duplicate
    lines.append({"url": "no-text"})  # a reject
    src.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    manifest = ShardManifest(key="s-0000", files=(RawFile(str(src), "web", "jsonl"),))
    stats = build_raw_shard(manifest, str(tmp_path / "raw"))
    assert stats.documents == 3000 and stats.rejected == {"duplicate_id": 1, "missing_text": 1}
    docs = pq.ParquetFile(tmp_path / "raw" / "documents.parquet")
    assert docs.schema_arrow == DOCUMENT_SCHEMA
    assert docs.metadata.num_row_groups > 1  # ~4.5 MB of text in ~1 MiB row groups
    for g in range(docs.metadata.num_row_groups):
        group_chars = sum(docs.read_row_group(g, columns=["num_chars"])["num_chars"].to_pylist())
        assert group_chars < storage.ROW_GROUP_BYTES + 2000
    assert docs.read(columns=["url"])["url"].to_pylist() == [f"u{i}" for i in range(3000)]
    rejects = pq.read_table(tmp_path / "raw" / "rejects.parquet").to_pylist()
    assert [r["reason"] for r in rejects] == ["duplicate_id", "missing_text"]
    assert rejects[0]["num_chars"] == len(lines[5]["text"]) and rejects[1]["num_chars"] is None
    manifest_json = json.loads((tmp_path / "raw" / "manifest.json").read_text())
    assert manifest_json["files"][0]["documents"] == 3000
    assert manifest_json["files"][0]["rejected"] == 2
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == [
        "documents.parquet",
        "manifest.json",
        "rejects.parquet",
    ]
