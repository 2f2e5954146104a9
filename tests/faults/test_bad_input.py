"""Bad input never kills a backfill silently and never loses a count.

Invalid UTF-8, binary content, truncated gzip/zstd, malformed JSON lines, WARC records with
broken headers, 10 MB documents and empty shards are each quarantined with a reason (or raise
an error naming the input and the offset), and documents in = kept + rejected throughout.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard

from pretrain import storage
from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.data.readers import RawFile, is_reject, iter_records
from pretrain.data.schema import doc_id, documents_table
from pretrain.errors import DataError
from pretrain.filters.config import FilterConfig
from pretrain.filters.funnel import funnel_reconciles
from pretrain.filters.pipeline import filter_shard

SENTENCE = "The committee met on Tuesday to review the budget and to plan the next year. "


def _jsonl(path: Path, lines: list[bytes]) -> RawFile:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return RawFile(uri=str(path), source="web", kind="jsonl")


def test_invalid_utf8_lines_are_repaired_or_quarantined(tmp_path: Path) -> None:
    cp1252 = b'{"text": "' + "café crème brûlée".encode("cp1252") + b'"}'
    raw = _jsonl(
        tmp_path / "mixed.jsonl",
        [json.dumps({"text": "fine"}).encode(), cp1252, bytes(range(128, 256))],
    )
    records = list(iter_records(raw))
    assert [r.get("reason") for r in records] == [None, None, "undecodable"]
    assert records[1]["text"] == "café crème brûlée"
    assert records[2]["url"].endswith("#L3")


def test_binary_files_and_binary_documents(tmp_path: Path) -> None:
    blob = tmp_path / "image.txt"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    [reject] = iter_records(RawFile(uri=str(blob), source="web", kind="text"))
    assert reject["reason"] == "binary_content"
    text = "".join(chr(c) for c in range(1, 32)) * 4 + SENTENCE
    rows = [{"id": doc_id(text), "text": text, "source": "web", "url": "u", "num_chars": len(text)}]
    raw_uri = str(tmp_path / "raw.parquet")
    storage.write_table(documents_table(rows), raw_uri)
    stats = filter_shard(raw_uri, str(tmp_path / "out"), FilterConfig())
    assert stats.dropped == {"binary_content": 1}


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_truncated_compressed_streams_name_the_file_and_count(tmp_path: Path, codec: str) -> None:
    lines = "\n".join(json.dumps({"text": f"document number {i} " * 20}) for i in range(3000))
    data = gzip.compress(lines.encode()) if codec == "gzip" else zstandard.compress(lines.encode())
    path = tmp_path / f"cut.jsonl.{'gz' if codec == 'gzip' else 'zst'}"
    path.write_bytes(data[: len(data) // 2])
    records = list(iter_records(RawFile(uri=str(path), source="web", kind="jsonl")))
    good, last = records[:-1], records[-1]
    assert last["reason"] == "read_error" and str(path) in last["detail"]
    assert f"after {len(good)} records" in last["detail"]
    assert 0 < len(good) < 3000 and not any(is_reject(r) for r in good)


def _warc(headers: dict[str, str], block: bytes) -> bytes:
    head = "\r\n".join(["WARC/1.0", *(f"{k}: {v}" for k, v in headers.items())])
    return head.encode() + b"\r\n\r\n" + block + b"\r\n\r\n"


def test_warc_broken_headers_are_quarantined_and_reading_resumes(tmp_path: Path) -> None:
    page = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><body><p>"
        + SENTENCE.encode()
        + b"</p></body></html>"
    )
    ok = {
        "WARC-Type": "response",
        "WARC-Target-URI": "http://a.example/",
        "Content-Length": str(len(page)),
    }
    bad_length = {**ok, "Content-Length": "twelve"}
    data = (
        _warc(ok, page)
        + b"garbage line\r\n"
        + _warc(bad_length, page)
        + _warc({**ok, "WARC-Target-URI": "http://b.example/"}, page)
    )
    path = tmp_path / "broken.warc.gz"
    path.write_bytes(gzip.compress(data))
    records = list(iter_records(RawFile(uri=str(path), source="web", kind="warc")))
    assert [r.get("reason") for r in records] == [
        None,
        "warc_broken_header",
        "warc_broken_header",
        None,
    ]
    offset = len(_warc(ok, page))
    assert records[1]["url"] == f"{path}@{offset}"
    assert "Content-Length" in records[2]["detail"]
    assert records[3]["url"] == "http://b.example/" and "committee" in records[3]["text"]


def test_ten_megabyte_document_is_quarantined_as_too_long(tmp_path: Path) -> None:
    huge = SENTENCE * (10_000_000 // len(SENTENCE) + 1)
    ok = SENTENCE * 12
    rows = [
        {"id": doc_id(t, "web", u), "text": t, "source": "web", "url": u, "num_chars": len(t)}
        for t, u in ((huge, "http://big.example/"), (ok, "http://ok.example/"))
    ]
    raw_uri = str(tmp_path / "raw.parquet")
    storage.write_table(documents_table(rows), raw_uri)
    stats = filter_shard(raw_uri, str(tmp_path / "out"), FilterConfig())
    assert stats.dropped.get("too_long") == 1 and stats.documents_in == 2
    assert stats.dropped_chars["too_long"] == len(huge)
    rejects = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()
    assert [r["url"] for r in rejects if r["reason"] == "too_long"] == ["http://big.example/"]


def test_empty_files_and_empty_shards(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl.gz"
    empty.write_bytes(gzip.compress(b""))
    manifest = ShardManifest(
        key="e-0000", files=(RawFile(uri=str(empty), source="web", kind="jsonl"),)
    )
    stats = build_raw_shard(manifest, str(tmp_path / "raw"))
    assert stats.documents == 0 and stats.rejected == {"empty_file": 1}
    raw_uri = str(tmp_path / "raw" / "documents.parquet")
    out = tmp_path / "filtered"
    filtered = filter_shard(raw_uri, str(out), FilterConfig())
    assert (filtered.documents_in, filtered.kept, filtered.dropped) == (0, 0, {})
    assert pq.read_table(out / "documents.parquet").num_rows == 0
    assert funnel_reconciles(raw_uri, str(out)).passed


def test_unexpected_failure_names_the_shard_and_offset(tmp_path: Path) -> None:
    rows = [
        {"id": str(i), "text": SENTENCE * 12, "source": "web", "url": f"http://x.example/{i}"}
        for i in range(5)
    ]
    raw_uri = str(tmp_path / "raw.parquet")
    storage.write_table(documents_table(rows), raw_uri)
    config = FilterConfig(batch_size=2, quality_model_uri=str(tmp_path / "no-such-model"))
    with pytest.raises(DataError, match="no-such-model"):
        filter_shard(raw_uri, str(tmp_path / "out"), config)
    bad = str(tmp_path / "bad.parquet")
    storage.write_table(documents_table(rows).drop_columns(["source"]), bad)
    with pytest.raises(DataError, match="bad.parquet lacks columns"):
        filter_shard(bad, str(tmp_path / "out2"), FilterConfig())
    assert not (tmp_path / "out2" / "documents.parquet").exists()  # nothing half-written
