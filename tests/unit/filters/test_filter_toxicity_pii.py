"""The filter stage end to end: toxicity_score on every row, toxic threads dropped, PII masked
in kept *and* rejected text."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.filters.config import FilterConfig
from pretrain.filters.langid import LangIdConfig
from pretrain.filters.pipeline import filter_shard
from tests.helpers.corpora import ENGLISH, FRENCH

THREAD = "\n\n".join(
    [
        "Honestly this whole thread is a joke and so are you.",
        "Shut up, you stupid moron, nobody asked for your worthless opinion.",
        "You are a pathetic idiot and everyone here hates you.",
        "Go away, loser. Your posts are garbage and you are a disgusting freak.",
        "Typical clueless idiot, crawl back under your rock, you ugly creep.",
        "What a dumb take from a brainless clown who cannot even read.",
        "Nobody cares about your whining, you miserable little troll.",
        "Get lost, you sad pathetic fool, and take your stupid friends with you.",
    ]
)


def _doc(text: str, url: str) -> dict:
    return {"id": doc_id(text, "web", url), "text": text, "source": "web", "url": url,
            "num_chars": len(text)}  # fmt: skip


def test_toxicity_score_everywhere_and_rejects_masked(tmp_path: Path) -> None:
    contact = " Write to ann.lee@example.org or call +49 30 45522651 (server 93.29.251.207)."
    rows = [
        _doc(ENGLISH + contact, "https://a.example/1"),
        _doc(FRENCH + contact, "https://a.example/2"),  # wrong language: rejected
        _doc(THREAD + contact, "https://a.example/3"),  # toxic: rejected
    ]
    storage.write_table(documents_table(rows), str(tmp_path / "in.parquet"))
    stats = filter_shard(
        str(tmp_path / "in.parquet"),
        str(tmp_path / "out"),
        FilterConfig(langid=LangIdConfig(languages=("en",)), gopher_quality=None, fineweb=None),
    )
    assert stats.kept == 1 and stats.dropped == {"toxic_content": 1, "wrong_language": 1}
    kept = pq.read_table(tmp_path / "out" / "documents.parquet").to_pylist()
    rejects = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()
    by_reason = {r["reason"]: r for r in rejects}
    assert kept[0]["toxicity_score"] == 0.0
    assert by_reason["toxic_content"]["toxicity_score"] > 0.6  # short lines: word lists only
    assert by_reason["wrong_language"]["toxicity_score"] is None  # French: no model, unscored
    for row in kept + rejects:
        for secret in ("ann.lee@example.org", "45522651", "93.29.251.207"):
            assert secret not in row["text"]
        assert "<EMAIL> or call <PHONE> (server <IP_ADDRESS>)." in row["text"]
    assert stats.pii_masked == {"email": 1, "ip_address": 1, "phone": 1}  # kept rows only


def test_documents_no_model_covers_are_counted_unscored(tmp_path: Path) -> None:
    rows = [
        _doc(ENGLISH, "https://b.example/1"),
        _doc(FRENCH, "https://b.example/2"),  # kept: every language is kept here
        _doc(THREAD, "https://b.example/3"),
    ]
    storage.write_table(documents_table(rows), str(tmp_path / "in.parquet"))
    stats = filter_shard(
        str(tmp_path / "in.parquet"),
        str(tmp_path / "out"),
        FilterConfig(gopher_quality=None, fineweb=None),
    )
    assert stats.kept == 2 and stats.dropped == {"toxic_content": 1}
    assert stats.toxicity_unscored == {"fr": 1}  # passed, but no sentence model read it
    # what judged each: the models for English, the French word list for the French page
    assert stats.toxicity_judged_by == {"models: en": 2, "word lists: fr": 1}
    reject = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()[0]
    assert reject["detail"].endswith("judged by models: en)")
    kept = {
        r["language"]: r for r in pq.read_table(tmp_path / "out" / "documents.parquet").to_pylist()
    }
    assert kept["fr"]["toxicity_score"] is None and kept["en"]["toxicity_score"] == 0.0
    metadata = stats.as_metadata()
    assert metadata["toxicity_unscored"] == 1 and metadata["toxicity_unscored_languages"] == "fr:1"
    assert "unscored** (no model for: fr 1)" in metadata["funnel_md"]
    assert metadata["toxicity_judged_by"] == "models: en 2; word lists: fr 1"
