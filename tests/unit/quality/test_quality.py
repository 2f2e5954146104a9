"""The DCLM-style quality classifier: trained in-process, deterministic, used by the filter."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.errors import ConfigError
from pretrain.filters.config import FilterConfig
from pretrain.filters.pipeline import filter_shard
from pretrain.quality.classifier import (
    QualityClassifierConfig,
    QualityModel,
    train_quality_classifier,
)
from tests.helpers.shared_data import SHARED_DATA

SHARED = SHARED_DATA
BOOKS = SHARED / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"
DOLMA = SHARED / "web" / "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
TOPICS = ["river", "garden", "library", "harbour", "market", "school", "railway", "bakery"]


def _prose(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return " ".join(
        f"The {topic} near the old town changed a great deal during year {1900 + i + k}. "
        f"People who lived there remember how the {topic} looked before the war, and they "
        f"still talk about it when they meet in the evening."
        for k in range(4)
    )


def _raw_shard(tmp_path: Path, rows: list[tuple[str, str]]) -> str:
    docs = [{"id": doc_id(t, s, str(i)), "text": t, "source": s, "url": f"http://x.example/{i}",
             "num_chars": len(t)} for i, (t, s) in enumerate(rows)]  # fmt: skip
    uri = str(tmp_path / "raw" / "documents.parquet")
    storage.write_table(documents_table(docs), uri)
    return uri


def test_synthetic_negatives_train_deterministically(tmp_path: Path) -> None:
    raw = _raw_shard(
        tmp_path, [(_prose(i), "prose") for i in range(80)] + [("x = 1\n" * 50, "code")]
    )
    config = QualityClassifierConfig(reference_sources=("prose",), max_docs_per_class=80)
    stats = train_quality_classifier([raw], str(tmp_path / "qc"), config)
    assert stats.negative_kind == "synthetic" and stats.positives == 80 == stats.negatives
    assert stats.heldout_accuracy >= 0.9 and stats.heldout_docs > 10
    first = (tmp_path / "qc" / "model.bin").read_bytes()
    train_quality_classifier([raw], str(tmp_path / "qc"), config)
    assert (tmp_path / "qc" / "model.bin").read_bytes() == first  # byte-identical retrain
    model = QualityModel.load(str(tmp_path / "qc"))
    [fluent, salad] = model.score([_prose(999), " ".join(sorted(_prose(999).split()))])
    assert fluent > 0.5 > salad
    assert 0.0 <= model.threshold_for_top_fraction(0.1) <= 1.0
    with pytest.raises(ConfigError, match="negatives"):
        QualityClassifierConfig(negatives="random")


def test_filter_writes_classifier_scores_and_keeps_top_fraction(tmp_path: Path) -> None:
    rows = [(_prose(i), "prose") for i in range(60)] + [(_prose(i), "web") for i in range(60, 80)]
    raw = _raw_shard(tmp_path, rows)
    config = QualityClassifierConfig(reference_sources=("prose",), negatives="synthetic")
    train_quality_classifier([raw], str(tmp_path / "qc"), config)
    out = tmp_path / "filtered"
    # Templated test prose repeats n-grams: switch the repetition rules off for this test.
    rules_off = {"gopher_repetition": None, "fineweb": None}
    qc = str(tmp_path / "qc")
    stats = filter_shard(raw, str(out), FilterConfig(quality_model_uri=qc, **rules_off))
    scores = pq.read_table(out / "documents.parquet").column("quality_score").to_pylist()
    assert stats.kept == len(scores) > 0 and all(s > 0.5 for s in scores)
    strict = FilterConfig(quality_model_uri=qc, min_quality_score=1.01, **rules_off)
    dropped = filter_shard(raw, str(tmp_path / "strict"), strict)
    assert dropped.kept == 0 and dropped.dropped.get("low_quality_score") == stats.kept
    with pytest.raises(ConfigError, match="quality_model_uri"):
        FilterConfig(min_quality_score=0.5)


@pytest.mark.slow
def test_books_versus_common_crawl(tmp_path: Path) -> None:
    if not (BOOKS.exists() and DOLMA.exists()):
        pytest.skip("needs ../shared/data")
    with gzip.open(DOLMA, "rt") as f:
        web = [json.loads(line)["text"] for line in f]
    raw = _raw_shard(tmp_path, [(t, "web") for t in web if t.strip()])
    config = QualityClassifierConfig(
        reference_sources=(), reference_uris=(str(BOOKS),), max_docs_per_class=600
    )
    stats = train_quality_classifier([raw], str(tmp_path / "qc"), config)
    assert stats.negative_kind == "pool" and stats.negatives > 200
    assert stats.heldout_accuracy >= 0.85
