"""Harvest, readers and raw shards on real inputs (the install itself and ../shared/data)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain.data.extract import ExtractConfig
from pretrain.data.harvest import discover_embedded
from pretrain.data.raw import (
    ShardManifest,
    build_raw_shard,
    list_source_files,
    plan_shards,
)
from pretrain.data.readers import RawFile, is_reject, iter_records
from pretrain.data.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA
from pretrain.errors import ConfigError, DataError
from tests.helpers.shared_data import SHARED_DATA

SHARED = SHARED_DATA
DOLMA = SHARED / "web" / "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
STDLIB_JSONL = SHARED / "code" / "python3.11.7_stdlib_1790files.jsonl.zst"
WARC_DIR = SHARED / "web" / "warc"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not present (needs ../shared/data)")
    return path


def test_discover_embedded_finds_code_prose_and_licenses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = discover_embedded()
    by_source = {s: [f for f in files if f.source == s] for s in ("code", "prose", "license")}
    assert len(by_source["code"]) > 100
    assert len(by_source["license"]) >= 1
    assert len(by_source["prose"]) >= 1
    assert all(f.kind == "text" and f.uri.endswith(".py") for f in by_source["code"])
    assert not any("site-packages" in f.uri for f in by_source["code"])
    assert {f.kind for f in by_source["prose"]} <= {"metadata", "text"}
    for group in by_source.values():
        assert [f.uri for f in group] == sorted(f.uri for f in group)
    assert all(Path(f.uri).is_absolute() for f in files)
    monkeypatch.chdir(tmp_path)
    assert discover_embedded() == files  # deterministic, whatever the working directory


def test_discover_embedded_caps_each_source() -> None:
    capped = discover_embedded(max_files_per_source={"code": 7, "license": 2})
    assert sum(f.source == "code" for f in capped) == 7
    assert sum(f.source == "license" for f in capped) == 2
    assert sum(f.source == "prose" for f in capped) == sum(
        f.source == "prose" for f in discover_embedded()
    )
    assert len(discover_embedded(max_files_per_source=3)) == 9
    with pytest.raises(ConfigError, match="unknown sources"):
        discover_embedded(max_files_per_source={"books": 3})


def test_embedded_files_read_as_documents() -> None:
    files = discover_embedded(max_files_per_source=5)
    records = [r for f in files for r in iter_records(f)]
    good = [r for r in records if not is_reject(r)]
    assert len(good) >= 12
    code = [r for r in good if r["source"] == "code"]
    assert code and all(r["url"].endswith(".py") for r in code)
    meta = [r for r in good if r["url"].startswith("pypi:")]
    assert meta and all("Metadata-Version" not in r["text"][:200] for r in meta)


def test_jsonl_gz_and_zst_from_shared_data() -> None:
    web = list(iter_records(RawFile(uri=str(_need(DOLMA)), source="web", kind="jsonl")))
    assert len(web) == 697
    assert not any(is_reject(r) for r in web)
    assert sum(r["text"] == "" for r in web) == 27
    assert all(r["source"] == "web" and r["url"] for r in web)
    code = list(iter_records(RawFile(uri=str(_need(STDLIB_JSONL)), source="code", kind="jsonl")))
    assert len(code) == 1790
    assert code[0]["url"] == "cpython-3.11.7/Lib/__future__.py"
    assert "def " in code[-1]["text"] or "class " in code[-1]["text"]


def test_warc_html_responses_become_text() -> None:
    raw = RawFile(uri=str(_need(WARC_DIR / "dolma_sample-0000.warc.gz")), source="web", kind="warc")
    records = list(iter_records(raw))
    assert len(records) == 22 and not any(is_reject(r) for r in records)
    assert all(r["url"].startswith("http") for r in records)
    assert all("<script" not in r["text"] and "<div" not in r["text"] for r in records)
    assert sum(len(r["text"]) > 200 for r in records) >= 15


def test_warc_non_html_and_old_versions_are_counted() -> None:
    wiki = RawFile(
        uri=str(_need(WARC_DIR / "ukwa_wikipedia-post-blackout.warc.gz")), source="web", kind="warc"
    )
    reasons = [r.get("reason") for r in iter_records(wiki)]
    assert reasons.count(None) == 1 and reasons.count("non_html") == 50
    clueweb = RawFile(
        uri=str(WARC_DIR / "resiliparse_clueweb-quirk.warc.gz"), source="web", kind="warc"
    )
    pages = list(iter_records(clueweb))
    assert len(pages) == 29 and not any(is_reject(r) for r in pages)
    # EUC-JP pages behind a bogus "Content-Encoding: gzip" header still decode to Japanese.
    first = pages[0]["text"]
    assert "\ufffd" not in first and any("\u30a0" <= c <= "\u30ff" for c in first)


def test_malformed_jsonl_lines_are_rejects_not_losses(tmp_path: Path) -> None:
    lines = [
        json.dumps({"text": "first good line", "id": "a"}),
        '{"text": "broken',
        json.dumps({"id": "no-text"}),
        "[1, 2, 3]",
        "",
        json.dumps({"text": "second", "metadata": {"url": "http://example.org/x"}}),
    ]
    path = tmp_path / "mixed.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    records = list(iter_records(RawFile(uri=str(path), source="web", kind="jsonl")))
    assert [r.get("reason") for r in records] == [
        None,
        "malformed_json",
        "missing_text",
        "malformed_json",
        None,
    ]
    assert records[0]["url"] == f"{path}#a"
    assert records[-1]["url"] == "http://example.org/x"


def test_truncated_gzip_and_undecodable_text(tmp_path: Path) -> None:
    lines = (json.dumps({"text": hashlib.sha1(str(i).encode()).hexdigest()}) for i in range(5000))
    data = gzip.compress("\n".join(lines).encode())
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(data[: len(data) // 2])
    records = list(iter_records(RawFile(uri=str(truncated), source="web", kind="jsonl")))
    assert records[-1]["reason"] == "read_error"
    assert not any(is_reject(r) for r in records[:-1]) and len(records) > 1
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    [record] = iter_records(RawFile(uri=str(latin), source="prose", kind="text"))
    assert record["text"] == "café crème"  # charset detected, not rejected
    noise = tmp_path / "noise.txt"
    noise.write_bytes(bytes(range(128, 256)) * 3)
    [reject] = iter_records(RawFile(uri=str(noise), source="prose", kind="text"))
    assert reject["reason"] == "undecodable" and reject["text"] is None


def test_parquet_reader(tmp_path: Path) -> None:
    good = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"text": ["alpha", None, "gamma"], "url": ["u1", "u2", None]}), good)
    records = list(iter_records(RawFile(uri=str(good), source="web", kind="parquet")))
    assert [r.get("reason") for r in records] == [None, "missing_text", None]
    assert records[0]["url"] == "u1" and records[2]["url"] == f"{good}#row2"
    no_text = tmp_path / "other.parquet"
    pq.write_table(pa.table({"body": ["x"]}), no_text)
    [reject] = iter_records(RawFile(uri=str(no_text), source="web", kind="parquet"))
    assert reject["reason"] == "missing_text_column"


def _files(n: int) -> list[RawFile]:
    return [
        RawFile(uri=f"/data/f{i:02d}.jsonl", source="web" if i % 2 else "code", kind="jsonl")
        for i in range(n)
    ]


def test_plan_shards_is_deterministic_and_bounded() -> None:
    manifests = plan_shards(_files(10), files_per_shard=4, max_shards=5, prefix="web")
    assert [m.key for m in manifests] == ["web-0000", "web-0001", "web-0002"]
    assert [len(m.files) for m in manifests] == [4, 3, 3]
    assert manifests[1].files[0].uri == "/data/f01.jsonl"
    assert manifests[0].sources == ["code", "web"]
    assert ShardManifest.from_json(manifests[2].to_json()) == manifests[2]
    assert len(plan_shards(_files(10), files_per_shard=None, max_shards=4, prefix="e")) == 4
    with pytest.raises(ConfigError, match="max_shards"):
        plan_shards(_files(10), files_per_shard=2, max_shards=3, prefix="web")


def test_list_source_files(tmp_path: Path) -> None:
    warcs = list_source_files(str(_need(WARC_DIR)), "web")
    assert len(warcs) == 9 and {f.kind for f in warcs} == {"warc"}
    with pytest.raises(DataError, match="no JSONL"):
        list_source_files(str(tmp_path), "web")


def test_build_raw_shard_writes_documents_rejects_and_manifest(tmp_path: Path) -> None:
    jsonl = tmp_path / "in" / "a.jsonl"
    jsonl.parent.mkdir()
    rows = [{"text": "one document", "url": "u1"}, {"text": "one document", "url": "u1"}]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n{oops\n")
    (tmp_path / "in" / "b.txt").write_bytes(bytes(range(128, 256)) * 3)  # no charset fits
    (tmp_path / "in" / "c.txt").write_text("plain text file")
    manifest = plan_shards(
        list_source_files(str(tmp_path / "in"), "web"),
        files_per_shard=None,
        max_shards=1,
        prefix="t",
    )[0]

    out = tmp_path / "out"
    stats = build_raw_shard(manifest, str(out))
    assert stats.as_metadata() == {
        "files": 3,
        "documents": 2,
        "chars": len("one document") + len("plain text file"),
        "rejected": 3,
        "rejected_duplicate_id": 1,
        "rejected_malformed_json": 1,
        "rejected_undecodable": 1,
        "documents_web": 2,
        **ExtractConfig().as_metadata(),  # the HTML extraction settings are recorded
    }
    assert stats.as_metadata()["extract_extractor"] == "hybrid"
    docs = pq.read_table(out / "documents.parquet")
    rejects = pq.read_table(out / "rejects.parquet")
    assert docs.schema == DOCUMENT_SCHEMA and rejects.schema == REJECT_SCHEMA
    assert docs.column("num_chars").to_pylist() == [12, 15]
    assert docs.column("language").null_count == 2
    assert set(rejects.column("stage").to_pylist()) == {"raw"}
    assert json.loads((out / "manifest.json").read_text())["key"] == "t-0000"

    first = (out / "documents.parquet").read_bytes()
    build_raw_shard(manifest, str(out))
    assert (out / "documents.parquet").read_bytes() == first  # byte-identical rerun
    assert build_raw_shard(manifest, str(tmp_path / "one"), max_docs=1).documents == 1


def _warc_record(headers: dict[str, str], block: bytes) -> bytes:
    lines = [
        "WARC/1.0",
        *(f"{k}: {v}" for k, v in headers.items()),
        f"Content-Length: {len(block)}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + block + b"\r\n\r\n"


def test_wet_conversion_and_chunked_html_records(tmp_path: Path) -> None:
    html = b"<html><head><title>t</title></head><body><p>Hello there.</p><script>x=1</script></body></html>"
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(html), html)
    http = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunked
    )
    data = _warc_record({"WARC-Type": "warcinfo"}, b"software: test\r\n")
    data += _warc_record({"WARC-Type": "response", "WARC-Target-URI": "http://a.example/"}, http)
    data += _warc_record(
        {"WARC-Type": "conversion", "WARC-Target-URI": "http://b.example/"},
        "Plain text, déjà.".encode(),
    )
    path = tmp_path / "mini.warc.wet.gz"
    path.write_bytes(gzip.compress(data))
    records = list(iter_records(RawFile(uri=str(path), source="web", kind="warc")))
    assert [(r["url"], r["text"]) for r in records] == [
        ("http://a.example/", "Hello there."),
        ("http://b.example/", "Plain text, déjà."),
    ]
    with pytest.raises(DataError, match="does not exist"):
        list(iter_records(RawFile(uri=str(tmp_path / "gone.jsonl"), source="web", kind="jsonl")))
