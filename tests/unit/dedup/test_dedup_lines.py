"""Line/paragraph dedup: the CS336 fixture's exact expected output, and the whole path
(signatures → clusters → apply) on inline documents where copies must not count twice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.dedup.apply import apply_dedup
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig, LineDedupConfig
from pretrain.dedup.lines import boilerplate_hashes, line_rows, remove_boilerplate, rows_table
from pretrain.dedup.minhash import compute_signatures
from pretrain.errors import ConfigError
from tests.helpers.shared_data import SHARED_DATA

FIXTURES = SHARED_DATA / "dups"
FIXTURE_FILE = FIXTURES / "cs336_dedup_test_fixtures.jsonl"


def test_cs336_line_dedup_fixture(tmp_path: Path) -> None:
    if not FIXTURE_FILE.exists():
        pytest.skip("../shared/data is not present")
    records = [json.loads(line) for line in FIXTURE_FILE.open()]
    by_set = {}
    for r in records:
        by_set.setdefault(r["set"], {})[r["file"]] = r["text"]
    given, expected = (
        by_set["documents_with_line_duplicates"],
        by_set["documents_line_deduplicated"],
    )
    names = sorted(given)
    config = LineDedupConfig(min_documents=2, skip_sources=())
    texts, sources = pa.array([given[n] for n in names]), pa.array(["web"] * len(names))
    uri = str(tmp_path / "lines.parquet")
    pq.write_table(rows_table([line_rows(texts, sources, config, offset=0)], config), uri)
    bad = boilerplate_hashes([uri], [np.empty(0, np.int64)], config, max_partition_rows=16)
    assert bad.num_rows == 3  # "Our servers ...", "- home", "- menu"
    assert bad.column("docs").to_pylist() == [2, 2, 2]
    cut, removed = remove_boilerplate(texts, sources, bad.column("h").to_numpy(), config)
    assert cut.to_pylist() == [expected[n] for n in names]
    assert removed.tolist() == [1, 1, 2, 2, 0]


def test_paragraphs_skip_sources_and_config_errors() -> None:
    config = LineDedupConfig(min_documents=2, unit="paragraph")
    texts = pa.array(["Intro.\n\nCookie notice here.\n\nBody one.", "Cookie notice here.", "x"])
    sources = pa.array(["web", "web", "code"])
    bad = np.array(pl_hash(["Cookie notice here."], config), np.uint64)
    cut, removed = remove_boilerplate(texts, sources, bad, config)
    assert cut.to_pylist() == ["Intro.\n\nBody one.", "", "x"]
    assert removed.tolist() == [1, 1, 0]
    code = pa.array(["Cookie notice here."])
    assert remove_boilerplate(code, pa.array(["code"]), bad, config)[1].tolist() == [0]
    with pytest.raises(ConfigError, match="1 would delete"):
        LineDedupConfig(min_documents=1)
    with pytest.raises(ConfigError, match="unit"):
        LineDedupConfig(unit="sentence")


def pl_hash(units: list[str], config: LineDedupConfig) -> np.ndarray:
    from pretrain.dedup.lines import unit_hashes

    return unit_hashes(units, config)


def _doc(text: str, url: str, quality: float = 0.5) -> dict:
    return {"id": doc_id(text, "web", url), "text": text, "source": "web", "url": url,
            "num_chars": len(text), "quality_score": quality}  # fmt: skip


def test_boilerplate_counts_only_surviving_documents(tmp_path: Path) -> None:
    footer = "Subscribe to our newsletter for weekly updates"
    # Bodies differ in words, not only digits: normalization v2 maps every number to "0".
    rivers = ["Thames", "Severn", "Trent", "Wye"]
    bodies = [
        f"Story {i}: the {r} rose {i} feet near mill number {i * 7}." for i, r in enumerate(rivers)
    ]
    docs = [_doc(f"{body}\n{footer}", f"https://news.example/{i}") for i, body in enumerate(bodies)]
    # Three copies of one page: its lines must not count as boilerplate three times.
    page = "A long unique article line about tides and harbours.\nSecond unique line here."
    docs += [_doc(page, f"https://mirror{i}.example/page") for i in range(3)]
    docs.append(_doc(footer, "https://news.example/footer-only"))
    uri = str(tmp_path / "docs" / "documents.parquet")
    storage.write_table(documents_table(docs), uri)
    config = DedupConfig(lines=LineDedupConfig(min_documents=3))
    sig = str(tmp_path / "sig" / "signatures.parquet")
    assert compute_signatures(uri, sig, config).line_rows == 4 * 2 + 3 * 2 + 1
    stats = cluster_duplicates([sig], str(tmp_path / "clusters"), config)
    assert (stats.removed_exact, stats.boilerplate_units) == (2, 1)
    out = tmp_path / "deduped"
    applied = apply_dedup(uri, str(tmp_path / "clusters" / "clusters.parquet"), str(out))
    assert applied.removed == {"boilerplate_only": 1, "exact_duplicate": 2}
    assert (applied.kept, applied.lines_removed, applied.documents_trimmed) == (5, 5, 5)
    kept = pq.read_table(out / "documents.parquet").to_pylist()
    assert [k["text"] for k in kept[:4]] == bodies
    assert all(k["num_chars"] == len(k["text"]) for k in kept)
    # the footer line and its newline are recorded as removed, per document and in total
    assert [k["chars_removed"] for k in kept[:4]] == [len(footer) + 1] * 4
    assert applied.chars_removed_boilerplate == 4 * (len(footer) + 1) + len(footer)
    assert page in [k["text"] for k in kept]
    rejects = pq.read_table(out / "rejects.parquet").to_pylist()
    assert {r["reason"]: r["text"] for r in rejects}["boilerplate_only"] == footer
