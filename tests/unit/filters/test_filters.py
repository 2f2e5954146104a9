"""Normalization, language ID, heuristics and the filter stage on a small mixed shard."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pretrain import storage
from pretrain.data.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, doc_id, documents_table
from pretrain.errors import ConfigError
from pretrain.filters.config import FilterConfig
from pretrain.filters.heuristics import HeuristicConfig, HeuristicFilter, quality_score
from pretrain.filters.langid import LangIdConfig, LanguageFilter, predict
from pretrain.filters.normalize import normalize_text
from pretrain.filters.pipeline import filter_shard
from tests.helpers.corpora import ENGLISH, FRENCH

SPAM = "Click here to win a free phone today!\n" * 30 + "Limited offer, act now."
CODE = (
    "def mean(values):\n    # Average of a non-empty list.\n"
    "    return sum(values) / len(values)\n\n\n\n"
    "class Box:\n    def __init__(self, x):\n        self.x = x  # {} [] ## :: ->\n"
)


def _doc(text: str, source: str, url: str) -> dict:
    return {"id": doc_id(text, source, url), "text": text, "source": source, "url": url,
            "num_chars": len(text)}  # fmt: skip


def test_normalize_prose_and_code() -> None:
    messy = "\ufb01ne\u00a0 text\r\nsecond\tline  \x07\r\n\n\n\n\ufeffend  "
    assert normalize_text(messy, code=False) == "fine text\nsecond line\n\nend"
    assert normalize_text(normalize_text(messy, code=False), code=False) == normalize_text(
        messy, code=False
    )
    code = "def f():\r\n    return 1   \r\n\x00"
    assert normalize_text(code, code=True) == "def f():\n    return 1"


def test_language_id_on_own_text() -> None:
    (en, en_score), (fr, fr_score) = predict([ENGLISH, FRENCH])
    assert (en, fr) == ("en", "fr")
    assert en_score > 0.9 and fr_score > 0.9
    only_en = LanguageFilter(LangIdConfig(languages=("en",)))
    doc = {"text": FRENCH, "source": "web"}
    assert only_en(doc) == "wrong_language" and doc["language"] == "fr"
    code = {"text": CODE, "source": "code"}
    assert only_en(code) is None and code["language"] == "code"
    assert code["language_score"] is None
    with pytest.raises(ConfigError, match="tuple"):
        LangIdConfig(languages="en")  # type: ignore[arg-type]


def test_heuristics_reasons_and_code_exemptions() -> None:
    rules = HeuristicFilter()
    assert rules({"text": ENGLISH, "source": "web", "language": "en"}) is None
    assert rules({"text": SPAM, "source": "web", "language": "en"}) == "repeated_lines"
    assert rules({"text": "Too short.", "source": "web"}) == "too_short"
    hashtags = " ".join(f"#tag{i} word" for i in range(60))
    assert rules({"text": hashtags, "source": "web", "language": "en"}) == "symbol_ratio"
    # The same symbol-heavy, short-worded text is fine as code.
    assert rules({"text": hashtags, "source": "code"}) is None
    assert rules({"text": CODE, "source": "code"}) is None
    assert rules({"text": CODE, "source": "web", "language": "en"}) == "too_few_words"
    with pytest.raises(ConfigError, match="min_chars"):
        HeuristicConfig(min_chars=100, max_chars=10)
    assert 0.0 <= quality_score(SPAM, code=False) < quality_score(ENGLISH, code=False) <= 1.0


def test_filter_shard_on_mixed_documents(tmp_path: Path) -> None:
    docs = [
        _doc(ENGLISH, "web", "http://example.org/river"),
        _doc(SPAM, "web", "http://example.org/spam"),
        _doc(FRENCH, "web", "http://example.org/marche"),
        _doc(" \n\t\x07 ", "web", "http://example.org/empty"),
        _doc(CODE, "code", "box.py"),
        _doc("\ufb01ve words of text only here.", "prose", "tiny.md"),
    ]
    raw_uri = str(tmp_path / "raw" / "documents.parquet")
    storage.write_table(documents_table(docs), raw_uri)
    out = tmp_path / "filtered"
    stats = filter_shard(raw_uri, str(out), FilterConfig())

    assert stats.documents_in == 6 and stats.kept == 3
    assert stats.dropped == {"empty": 1, "gopher_dup_line_frac": 1, "too_short": 1}
    assert stats.documents_in == stats.kept + sum(stats.dropped.values())
    assert stats.chars_in == stats.chars_kept + sum(stats.dropped_chars.values())
    meta = stats.as_metadata()
    assert meta["dropped_gopher_dup_line_frac"] == 1 and meta["kept_code"] == 1
    assert "| gopher_dup_line_frac | 1 |" in meta["funnel_md"]

    kept = pq.read_table(out / "documents.parquet")
    assert kept.schema == DOCUMENT_SCHEMA
    rows = {r["url"]: r for r in kept.to_pylist()}
    assert set(rows) == {"http://example.org/river", "http://example.org/marche", "box.py"}
    assert rows["http://example.org/marche"]["language"] == "fr"
    assert rows["http://example.org/river"]["language"] == "en"
    assert rows["http://example.org/river"]["language_score"] > 0.65
    assert rows["box.py"]["language"] == "code" and rows["box.py"]["language_score"] is None
    assert rows["box.py"]["text"].count("\n\n\n") == 0  # blank runs collapsed, indent kept
    assert "    return sum(values)" in rows["box.py"]["text"]
    assert all(r["num_chars"] == len(r["text"]) for r in rows.values())
    assert all(0.0 <= r["quality_score"] <= 1.0 for r in rows.values())

    rejects = pq.read_table(out / "rejects.parquet")
    assert rejects.schema == REJECT_SCHEMA
    reasons = {r["url"]: (r["stage"], r["reason"]) for r in rejects.to_pylist()}
    assert reasons["http://example.org/spam"] == ("filter", "gopher_dup_line_frac")
    assert reasons["http://example.org/empty"] == ("filter", "empty")
    assert json.loads((out / "stats.json").read_text())["kept"] == 3

    first = (out / "documents.parquet").read_bytes()
    filter_shard(raw_uri, str(out), FilterConfig())
    assert (out / "documents.parquet").read_bytes() == first

    english_only = FilterConfig(langid=LangIdConfig(languages=("en",)))
    stats_en = filter_shard(raw_uri, str(tmp_path / "en"), english_only)
    assert stats_en.dropped["wrong_language"] == 1 and stats_en.kept == 2


def test_filter_config_requires_consistent_code_sources() -> None:
    with pytest.raises(ConfigError, match="code_sources"):
        FilterConfig(code_sources=("code", "notebooks"))
    config = FilterConfig.for_code_sources(("code", "notebooks"))
    assert config.heuristics.code_sources == ("code", "notebooks")
