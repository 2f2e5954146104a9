"""Fault matrix (issue 19, items 1–10): each bad raw input planted among good documents.

Every case runs the real stages on a source folder: ``list_source_files`` → ``plan_shards``
→ ``build_raw_shard`` per shard group → ``filter_shard``, and asserts that no stage crashes,
every planted good document reaches the filter, every bad record is a reject with its own
reason (damaged streams say how much was lost) and counts reconcile. The gzip bomb is read in
a child process whose peak RSS is bounded. Run::

    .venv/bin/pytest -q tests/faults/test_bad_inputs.py
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from pretrain.data.raw import build_raw_shard, list_source_files, plan_shards
from pretrain.data.readers import RawFile, iter_records
from pretrain.filters.config import FilterConfig
from pretrain.filters.funnel import funnel_reconciles
from pretrain.filters.pipeline import filter_shard
from pretrain.tmpfiles import current_umask
from tests.helpers.shared_data import SHARED_DATA

SENTENCE = "The committee met on Tuesday to review the budget and to plan the next year. "


def good(tag: str) -> str:
    return f"good document {tag}. " + SENTENCE * 8


def _lines(*objs: object) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def _run_stages(folder: Path, out: Path, max_shards: int = 3) -> tuple[list[dict], list[dict]]:
    """All stages over ``folder``; returns (raw documents, raw rejects) of every shard."""
    files = list_source_files(str(folder), "web")
    docs, rejects = [], []
    for manifest in plan_shards(files, files_per_shard=None, max_shards=max_shards, prefix="w"):
        raw_dir = out / "raw" / manifest.key
        stats = build_raw_shard(manifest, str(raw_dir))
        shard_docs = pq.read_table(raw_dir / "documents.parquet").to_pylist()
        shard_rejects = pq.read_table(raw_dir / "rejects.parquet").to_pylist()
        assert stats.documents == len(shard_docs) and stats.num_rejected == len(shard_rejects)
        per_file = json.loads((raw_dir / "manifest.json").read_text())["files"]
        assert sum(f["documents"] + f["rejected"] for f in per_file) == stats.documents + len(
            shard_rejects
        )
        filtered_dir = out / "filtered" / manifest.key
        filtered = filter_shard(
            str(raw_dir / "documents.parquet"), str(filtered_dir), FilterConfig()
        )
        assert filtered.documents_in == stats.documents
        assert funnel_reconciles(str(raw_dir / "documents.parquet"), str(filtered_dir)).passed
        docs += shard_docs
        rejects += shard_rejects
    return docs, rejects


def _tags(docs: list[dict]) -> list[str]:
    return sorted(d["text"].split(".")[0].removeprefix("good document ") for d in docs)


def test_fault_matrix_quarantines_each_bad_input_and_keeps_every_good_one(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    expected_good: list[str] = []

    def plant(name: str, data: bytes, tags: list[str]) -> None:
        (src / name).write_bytes(data)
        expected_good.extend(tags)

    # 1. a valid JSON escape for a lone surrogate
    plant("surrogate.jsonl", _lines({"text": good("s1")}) + b'{"text": "bad \\ud800 x"}\n'
          + _lines({"text": good("s2")}), ["s1", "s2"])  # fmt: skip
    # 2. an integer url column; 9. invalid UTF-8 in a string column; 10. wrong text types
    pq.write_table(pa.table({"text": [good("p1"), good("p2")], "url": [17, 18]}), src / "i.parquet")
    expected_good += ["p1", "p2"]
    texts = pa.array([good("p3").encode(), b"bad \xff\xfe", good("p4").encode()], pa.binary())
    pq.write_table(pa.table({"text": texts.view(pa.string())}), src / "utf8.parquet")
    expected_good += ["p3", "p4"]
    pq.write_table(pa.table({"text": pa.array([b"x", None], pa.binary())}), src / "bin.parquet")
    pq.write_table(pa.table({"text": [[1, 2]]}), src / "list.parquet")
    plant("types.jsonl", _lines({"text": 7}, {"text": ["a"]}, {"text": None}, {"text": good("t1")}),
          ["t1"])  # fmt: skip
    # 7. names that used to be skipped silently are read; the rest are listed as rejects
    plant("b.json", _lines({"text": good("e1")}), ["e1"])
    plant("c.jsonl.bz2", bz2.compress(_lines({"text": good("e2")})), ["e2"])
    plant("d.jsonl.xz", lzma.compress(_lines({"text": good("e3")})), ["e3"])
    plant("f.ndjson.gz", gzip.compress(_lines({"text": good("e4")})), ["e4"])
    plant("g.json.zst", zstandard.compress(_lines({"text": good("e5")})), ["e5"])
    plant("_underscore.jsonl", _lines({"text": good("e6")}), ["e6"])
    plant("h.csv", b"text\nnot read\n", [])
    plant(".hidden.jsonl", _lines({"text": "hidden"}), [])
    # 8. a UTF-8 byte-order mark
    plant("bom.jsonl", b"\xef\xbb\xbf" + _lines({"text": good("bom1")}, {"text": good("bom2")}),
          ["bom1", "bom2"])  # fmt: skip
    # 5. a truncated gzip stream: what came before is kept, the loss is named
    cut = gzip.compress(_lines(*({"text": good(f"cut{i}")} for i in range(400))))
    (src / "cut.jsonl.gz").write_bytes(cut[: len(cut) * 3 // 4])
    # 4. a symlink loop
    os.symlink(".", src / "loop")

    docs, rejects = _run_stages(src, tmp_path / "out")

    # item 18: every artifact has the mode the umask gives (no 0600 files from mkstemp)
    umask = current_umask()
    modes = {p.stat().st_mode & 0o777 for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert modes == {0o666 & ~umask}
    cut_kept = [t for t in _tags(docs) if t.startswith("cut")]
    assert 0 < len(cut_kept) < 400
    assert sorted(t for t in _tags(docs) if not t.startswith("cut")) == sorted(expected_good)
    assert len({d["id"] for d in docs}) == len(docs)  # the loop did not list files twice
    reasons = sorted((Path(r["url"].split("#")[0]).name, r["reason"]) for r in rejects)
    assert reasons == sorted([
        ("surrogate.jsonl", "invalid_unicode"),
        ("utf8.parquet", "undecodable"),
        ("bin.parquet", "text_not_string"),
        ("bin.parquet", "missing_text"),
        ("list.parquet", "text_not_string"),
        ("types.jsonl", "text_not_string"),
        ("types.jsonl", "text_not_string"),
        ("types.jsonl", "missing_text"),
        ("h.csv", "unsupported_format"),
        (".hidden.jsonl", "unsupported_format"),
        ("cut.jsonl.gz", "read_error"),
    ])  # fmt: skip
    by_reason = {r["reason"]: r for r in rejects}
    assert "U+D800" in by_reason["invalid_unicode"]["detail"]
    assert by_reason["read_error"]["detail"].startswith(f"after {len(cut_kept)} records")
    assert {d["url"] for d in docs if d["text"].startswith("good document p1")} == {
        f"{src / 'i.parquet'}#row0"
    }


def _warc_member(i: int) -> bytes:
    page = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><body><p>{good(f'w{i}')}</p></body></html>"
    body = page.encode()
    head = (
        f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://x.example/{i}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return gzip.compress(head.encode() + body + b"\r\n\r\n")


def test_corrupt_gzip_member_in_warc_resyncs_and_counts_the_loss(tmp_path: Path) -> None:
    members = [_warc_member(i) for i in range(201)]
    bad = bytearray(members[100])
    bad[30:60] = b"\x00" * 30  # damage the deflate data of one member
    members[100] = bytes(bad)
    src = tmp_path / "src"
    src.mkdir()
    (src / "crawl.warc.gz").write_bytes(b"".join(members))
    docs, rejects = _run_stages(src, tmp_path / "out")
    assert len(docs) == 200 and "w100" not in _tags(docs)
    assert [r["reason"] for r in rejects] == ["corrupt_member"]
    detail = rejects[0]["detail"]
    offset = sum(len(m) for m in members[:100])
    assert detail.startswith("1 record(s) lost") and f"at byte {offset}" in detail
    assert f"{len(members[100]):,} compressed bytes" in detail


def test_truncated_zstd_names_the_cut(tmp_path: Path) -> None:
    data = zstandard.compress(_lines(*({"text": good(f"z{i}")} for i in range(2000))))
    path = tmp_path / "cut.jsonl.zst"
    path.write_bytes(data[: len(data) // 2])
    records = list(iter_records(RawFile(uri=str(path), source="web", kind="jsonl")))
    assert records[-1]["reason"] == "read_error" and "cut short" in records[-1]["detail"]
    assert 0 < len(records) - 1 < 2000


def test_overlong_line_is_a_reject_and_reading_continues(tmp_path: Path) -> None:
    from pretrain.data import streams

    path = tmp_path / "long.jsonl"
    path.write_bytes(_lines({"text": "x" * 5000}, {"text": good("after")}))
    stream = streams.open_stream(str(path), max_line_bytes=1000)
    with pytest.raises(streams.LineTooLong, match="5,013 bytes"):
        stream.readline()
    assert b"good document after" in stream.readline()


BOMB_READER = """
import sys
from pretrain.data.readers import RawFile, iter_records
def hwm():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
before = hwm()
out = [r.get("reason") for r in iter_records(RawFile(uri=sys.argv[1], source="web", kind="jsonl"))]
print(out, (hwm() - before) // 1024)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_gzip_bomb_peak_rss_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    zeros, packer = bytes(2**24), zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for _ in range(64):  # 1 GiB of zeros, under 5 MB on disk
            f.write(packer.compress(zeros))
        f.write(packer.compress(b"\n" + _lines({"text": good("after")})) + packer.flush())
    assert path.stat().st_size < 5 * 2**20
    result = subprocess.run(
        [sys.executable, "-c", BOMB_READER, str(path)],
        capture_output=True, text=True, check=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    reasons, growth_mb = result.stdout.rsplit(" ", 1)
    assert reasons == "['line_too_long', None]"
    assert int(growth_mb) < 100, f"reader grew by {growth_mb} MB on a 1 GiB line"
    print(f"gzip bomb: peak RSS grew by {growth_mb.strip()} MB")


REUTERS = SHARED_DATA / "web/news/reuters21578_apte_nltk_10788docs.jsonl.gz"


@pytest.mark.skipif(not REUTERS.exists(), reason="needs ../shared/data (real news text)")
def test_same_records_in_two_shard_groups_are_deduplicated_consistently(tmp_path: Path) -> None:
    from pretrain.dedup.apply import apply_dedup
    from pretrain.dedup.clusters import cluster_duplicates
    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.minhash import compute_signatures
    from pretrain.errors import DataError
    from pretrain.mixture.build import _read_documents

    with gzip.open(REUTERS, "rt") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(60), f, strict=False)]
    records = [{"text": t, "url": f"http://reuters.example/{i}"} for i, t in enumerate(texts)]
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jsonl").write_bytes(_lines(*records))
    (src / "a (copy).jsonl").write_bytes(_lines(*records))
    (src / "other.jsonl").write_bytes(_lines(*({**r, "url": r["url"] + "?b"} for r in records[:5])))
    out = tmp_path / "out"
    _run_stages(src, out, max_shards=3)
    shards = sorted((out / "filtered").iterdir())
    filtered = [pq.read_table(s / "documents.parquet").column("id").to_pylist() for s in shards]
    assert len(shards) == 3 and filtered[0] == filtered[1] and len(filtered[0]) > 20
    config = DedupConfig()
    sig_uris = []
    for shard in shards:
        sig_uris.append(str(tmp_path / "sig" / shard.name / "signatures.parquet"))
        compute_signatures(str(shard / "documents.parquet"), sig_uris[-1], config)
    cluster_duplicates(sig_uris, str(tmp_path / "clusters"), config)
    stats = json.loads((tmp_path / "clusters" / "stats.json").read_text())
    assert stats["repeated_ids"] == stats["repeated_copies"] > 0
    kept_ids, rejects = [], []
    for shard in shards:
        applied = apply_dedup(
            str(shard / "documents.parquet"),
            str(tmp_path / "clusters" / "clusters.parquet"),
            str(tmp_path / "deduped" / shard.name),
        )
        assert applied.documents_in == applied.kept + sum(applied.removed.values())
        kept_ids += pq.read_table(tmp_path / "deduped" / shard.name / "documents.parquet")[
            "id"
        ].to_pylist()
        rejects += pq.read_table(tmp_path / "deduped" / shard.name / "rejects.parquet").to_pylist()
    assert len(kept_ids) == len(set(kept_ids))  # each id kept once, in one shard
    repeated = [r for r in rejects if r["reason"] == "repeated_id"]
    assert 0 < len(repeated) <= stats["repeated_copies"]  # others went as exact duplicates
    assert all("a.jsonl" not in r["detail"] or "same id kept in" in r["detail"] for r in repeated)
    every_id = {i for ids in filtered for i in ids}
    assert every_id == set(kept_ids) | {r["id"] for r in rejects}  # every id accounted for
    _read_documents([str(tmp_path / "deduped" / s.name / "documents.parquet") for s in shards])
    with pytest.raises(DataError, match=r"duplicate ids \(e\.g\. [0-9a-f]{40} in .*w-000"):
        _read_documents([str(s / "documents.parquet") for s in shards])


def test_symlink_loop_lists_each_file_once(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    for name in ("a.jsonl", "sub/b.jsonl", "../elsewhere/c.jsonl"):
        (src / name).write_bytes(_lines({"text": good(name)}))
    os.symlink(".", src / "loop")  # ln -s . loop
    os.symlink("..", src / "sub" / "up")  # a loop one level down
    os.symlink(tmp_path / "elsewhere", src / "linked")  # a real folder reached by a link
    os.symlink(src / "a.jsonl", src / "alias.jsonl")  # the same file under two names
    os.symlink(tmp_path / "missing", src / "dangling.jsonl")
    files = list_source_files(str(src), "web")
    assert [Path(f.uri).relative_to(src).as_posix() for f in files] == [
        "a.jsonl",
        "linked/c.jsonl",
        "sub/b.jsonl",
    ]


def test_a_shard_that_fails_while_writing_commits_neither_table(tmp_path: Path) -> None:
    from pretrain.data.raw import ShardManifest

    src = tmp_path / "a.jsonl"
    src.write_bytes(_lines({"text": good("x")}))
    # a source name no UTF-8 writer accepts: the documents table fails when it is written
    raw = RawFile(uri=str(src), source="web\udc80", kind="jsonl")
    with pytest.raises(UnicodeEncodeError):
        build_raw_shard(ShardManifest(key="w-0000", files=(raw,)), str(tmp_path / "out"))
    assert list((tmp_path / "out").iterdir()) == []  # not rejects.parquet alone
