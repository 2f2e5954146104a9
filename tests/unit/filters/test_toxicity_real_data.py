"""Toxicity against human labels and real news (``../shared/data``; skipped without it).

A regression guard, not the benchmark (``bench/cleaning_quality.py`` measures the held-out
numbers). Hard negatives, every one of which must pass: Reuters-21578 stories about violence
or politics (≥ 2 such words: 1,100 stories), the real 2012 news pages of news outlets in the
extraction set that report violence or politics (a mass shooting, Syria, Benghazi, the
shooting of a congresswoman, elections; their gold main text), and 13 Gutenberg books (insults
in dialogue, "hell", "Moby Dick"). English web pages must mostly pass, and forum threads and
implicit hate must mostly be flagged. Language comes from LID-176 as in the filter stage.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from pretrain.filters.langid import predict
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
from tests.helpers.shared_data import SHARED_DATA
from tests.helpers.toxicity_splits import (
    NEWS_OUTLETS,
    POLITICAL,
    VIOLENT,
    hatecheck_splits,
    split_of,
    stormfront_blocks_of,
    stormfront_posts_of,
)

DATA = SHARED_DATA
STORMFRONT = DATA / "toxicity" / "stormfront_hate_speech_10944.jsonl.gz"
TOXIGEN = DATA / "toxicity" / "toxigen_seed_statements_624.jsonl.gz"
HATECHECK = DATA / "toxicity" / "hatecheck_functional_tests_3728.jsonl.gz"
REUTERS = DATA / "web" / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz"
PAGES = DATA / "extraction" / "dragnet_test_415pages.jsonl.gz"
BOOKS = DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"
WEB = DATA / "web" / "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
# held-out threads of ten neutral statements about groups flagged: toxicity-v1 (0.15 for a
# sentence naming a group) 0.97, toxicity-v2 0.37, toxicity-v3 0.37, toxicity-v4 (the
# selection holds them to 0.35 on dev; the trade-off is in bench/RESULTS.md)
NEUTRAL_THREADS_FLAGGED_AT_MOST = 0.5
HELD_OUT_TEN_POST_RECALL_AT_LEAST = 0.35  # measured 0.41 (bench/RESULTS.md)
pytestmark = pytest.mark.skipif(not STORMFRONT.exists(), reason=f"{DATA} not present")


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _held_out(key: str) -> bool:
    """The fifth the shipped model never saw (the split of its training script and bench)."""
    return split_of(key) == "heldout"


def _flagged(docs: list[dict], rule: ToxicityFilter) -> list[dict]:
    for doc, (language, _) in zip(docs, predict([d["text"] for d in docs]), strict=True):
        doc["language"] = language
    rule.score_batch(docs)
    return [d for d in docs if rule.check(d) is not None]


def _threads(per_thread: int) -> list[dict]:
    texts = [
        " ".join(r["text"] for r in sentences)
        for posts in stormfront_posts_of(_read(STORMFRONT)).values()
        for _, sentences in posts
    ]
    return [
        {"text": "\n\n".join(texts[i : i + per_thread])} for i in range(0, len(texts), per_thread)
    ]


def test_news_about_violence_and_politics_and_books_are_never_flagged() -> None:
    rule = ToxicityFilter(ToxicityConfig())
    stories = [
        r
        for r in _read(REUTERS)
        if len(VIOLENT.findall(r["text"])) >= 2 or len(POLITICAL.findall(r["text"])) >= 2
    ]
    pages = [
        r
        for r in _read(PAGES)
        if NEWS_OUTLETS.match(r["url"] or "")
        and len(VIOLENT.findall(r["text"])) + len(POLITICAL.findall(r["text"])) >= 2
    ]
    books = _read(BOOKS)  # fmt: skip
    assert len(stories) > 1000 and len(pages) > 40 and len(books) == 13
    for name, docs in (("Reuters", stories), ("news pages", pages), ("books", books)):
        flagged = _flagged([{"id": d["id"], "text": d["text"]} for d in docs], rule)
        assert not flagged, (name, [(d["id"], rule.check(d)) for d in flagged])
    # what keeps them clean is the calibrated bar: from 0.5, with two toxic sentences and 6% of
    # a text enough (the rule before toxicity-v4), some of them are flagged
    plain = ToxicityFilter(
        ToxicityConfig(shipped_threshold=0.5, min_toxic_sentences=2, max_toxic_share=0.06)
    )
    assert _flagged([{"text": d["text"]} for d in stories + pages], plain)


def test_web_pages_mostly_pass_and_forum_threads_and_implicit_hate_are_flagged() -> None:
    rule = ToxicityFilter(ToxicityConfig())
    web = [{"text": r["text"]} for r in _read(WEB) if (r.get("text") or "").strip()]
    assert len(_flagged(web, rule)) / len(web) <= 0.02
    # the whole forum, 30 posts a thread (v4 0.51; v3 0.98 with its document model, v2 0.84,
    # v1 0.92): most of its posts hold no sentence its annotators labelled hate
    threads = _threads(30)
    assert len(_flagged(threads, rule)) / len(threads) >= 0.45
    before = ToxicityConfig(shipped_model=None, identity_threshold=0.08, reported_threshold=None)
    hate = [{"text": r["text"]} for r in _read(TOXIGEN) if r["toxic"] and _held_out(r["id"])]
    found = len(_flagged(hate, rule)) / len(hate)
    without = len(_flagged([dict(d) for d in hate], ToxicityFilter(before))) / len(hate)
    # implicit, no slur: v2 finds 0.54 of the 59, the profanity model with the identity rule 0.27
    assert found >= 0.5 and found > without + 0.2, (found, without)


def _neutral_group_statements() -> list[str]:
    """The held-out neutral statements about groups: ToxiGen's neutral seeds and HateCheck's
    ``ident_neutral_nh`` / ``ident_pos_nh`` cases (split by root template, as the bench does)."""
    neutral = [r["text"] for r in _read(TOXIGEN) if not r["toxic"] and _held_out(r["id"])]
    cases = _read(HATECHECK)
    return neutral + [
        r["text"]
        for r, split in zip(cases, hatecheck_splits(cases), strict=True)
        if r["functionality"] in ("ident_neutral_nh", "ident_pos_nh") and split == "heldout"
    ]


def test_threads_of_neutral_statements_about_groups_mostly_pass() -> None:
    """Talking about a group ("I love immigrants") is not hate: toxicity-v1 flagged 97% of
    these threads, toxicity-v2 37%, toxicity-v3 37%."""
    statements = _neutral_group_statements()
    assert len(statements) > 100
    rng = random.Random(0)
    threads = [{"text": "\n\n".join(rng.sample(statements, 10))} for _ in range(100)]
    flagged = len(_flagged(threads, ToxicityFilter(ToxicityConfig()))) / len(threads)
    assert flagged <= NEUTRAL_THREADS_FLAGGED_AT_MOST, flagged


def _held_out_threads(per_thread: int) -> list[dict]:
    """Threads of ``per_thread`` posts cut from the held-out 30-post blocks of each subforum
    (the unit the shipped models' split follows)."""
    threads = []
    for _, split, posts in stormfront_blocks_of(_read(STORMFRONT)):
        if split != "heldout":
            continue
        for i in range(0, len(posts), per_thread):
            chunk = posts[i : i + per_thread]
            threads.append({"text": "\n\n".join(" ".join(r["text"] for r in s) for _, s in chunk)})
    return threads


def test_held_out_forum_threads_of_ten_posts_are_found_by_the_sentence_rule() -> None:
    """Most of a hate forum's 10-post threads hold at most one sentence its annotators
    labelled hate: toxicity-v4 finds 0.41 of the held-out ones (toxicity-v3's document model,
    which read a thread whole, found 0.83 and flagged shop pages and sports logs for their
    style; bench/RESULTS.md); without the shipped model and the group rule 0.26."""
    threads = _held_out_threads(10)
    assert len(threads) > 80
    found = len(_flagged(threads, ToxicityFilter(ToxicityConfig()))) / len(threads)
    without = ToxicityFilter(ToxicityConfig(shipped_model=None, identity_threshold=None))
    words = len(_flagged([dict(t) for t in threads], without)) / len(threads)
    assert found >= HELD_OUT_TEN_POST_RECALL_AT_LEAST and found > words + 0.1, (found, words)


def test_a_page_in_another_language_that_lid_calls_english_is_not_read_by_the_model() -> None:
    """A Min Nan Wikipedia talk page of the Common Crawl sample: LID-176 says English, and
    toxicity-v3's model flagged its one line (1.000). Its words look like no English sentence,
    so no model reads it now."""
    rows = _read(WEB)
    page = next(r for r in rows if (r.get("text") or "").startswith("Thó-lūn:Nointel"))
    doc = {"text": page["text"]}
    assert not _flagged([doc], ToxicityFilter(ToxicityConfig()))
    assert doc["language"] == "en" and doc["toxicity_score"] == 0.0
    assert ToxicityFilter().judged_by(doc) == "word lists: en"  # what could have flagged it
