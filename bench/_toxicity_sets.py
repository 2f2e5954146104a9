"""Labelled document sets for ``bench/cleaning_quality.py`` (toxicity part), built from ../shared/data.

Toxic sets are *documents*, not sentences, because the filter judges whole documents:

- ``stormfront_threads``: consecutive posts of one Stormfront subforum (sentences of a post
  joined, posts separated by blank lines), 10 posts a thread: every thread of the forum,
  including the many threads without a sentence its annotators labelled hate.
- ``stormfront_threads_30_posts``: the same with 30 posts a thread (a forum page or more: the
  share of toxic sentences of a longer thread varies less).
- ``stormfront_forum_pages``: the 10-post threads with the short lines a scraped forum page
  puts around each post (user name, post count, "Quote", "Reply"), which must not dilute them.
- ``stormfront_hate_threads``: the same, from posts with at least one ``hate`` sentence.
- ``twitter_threads``: 10 consecutive Davidson et al. tweets (mostly offensive, as sampled).

Clean sets: ``clean_web`` (English Common Crawl pages of the dolma and CCNet-head samples)
and ``violent_news`` (Reuters-21578 stories with at least two violence words: killings,
bombs, attacks, police), ``all_reuters_news`` (all 10,788 stories) and ``gutenberg_books`` (13 novels, plays and
poems: insults in dialogue, "hell", "Moby Dick"). Every set is split 80/20 by a hash of its id: tune on ``dev``,
report ``heldout``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TOXICITY = DATA / "toxicity"
WEB = DATA / "web"
_VIOLENT = re.compile(
    r"\b(?:kill(?:ed|ing|s)?|murder\w*|shot|shooting|bomb\w*|attack\w*|police|dead|wounded|"
    r"rebels?|gunmen|explosion|terroris\w*|guerrillas?|army|troops)\b",
    re.IGNORECASE,
)


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def split_of(key: str) -> str:
    """``heldout`` for a stable fifth of the keys, ``dev`` for the rest."""
    return "heldout" if int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 5 == 0 else "dev"


def stormfront_threads(
    *, hate_only: bool, per_thread: int = 10, page_lines: bool = False
) -> list[dict]:
    posts: dict[tuple[str, str], list[dict]] = {}
    for row in _read(TOXICITY / "stormfront_hate_speech_10944.jsonl.gz"):
        posts.setdefault((row["subforum_id"], row["post_id"]), []).append(row)
    by_subforum: dict[str, list[tuple[str, str]]] = {}
    for (subforum, post_id), rows in sorted(posts.items()):
        if hate_only and not any(r["label"] == "hate" for r in rows):
            continue
        rows.sort(key=lambda r: r["sentence_no"])
        text = " ".join(r["text"] for r in rows)
        if page_lines:  # what a scraped forum page puts around each post
            text = f"user{rows[0]['user_id']}\nPosts: {int(post_id) % 4000:,}\nQuote\n{text}\nReply"
        by_subforum.setdefault(subforum, []).append((post_id, text))
    threads = []
    for subforum, items in sorted(by_subforum.items()):
        for start in range(0, len(items), per_thread):
            chunk = items[start : start + per_thread]
            key = f"stormfront:{subforum}:{chunk[0][0]}"
            threads.append({"id": key, "text": "\n\n".join(t for _, t in chunk),
                            "posts": [p for p, _ in chunk]})  # fmt: skip
    return threads


def training_labels() -> list[dict]:
    """Labelled sentences and tweets for a toxicity classifier, from the ``dev`` side only.

    Stormfront sentences (``hate`` toxic, ``noHate`` clean) of posts in ``dev`` 10-post threads
    and Davidson tweets of ``dev`` 10-tweet threads: nothing of the held-out threads of
    ``stormfront_threads``, ``stormfront_forum_pages`` or ``twitter_threads``. The 30-post and
    hate-only threads group the same posts differently: see ``OVERLAPS_TRAINING``.
    """
    held: set[tuple[str, str]] = set()
    for thread in stormfront_threads(hate_only=False):
        if split_of(thread["id"]) == "heldout":
            held.update((thread["id"].split(":")[1], p) for p in thread["posts"])
    rows = [
        {"text": r["text"], "toxic": r["toxic"]}
        for r in _read(TOXICITY / "stormfront_hate_speech_10944.jsonl.gz")
        if r["toxic"] is not None and (r["subforum_id"], r["post_id"]) not in held
    ]
    tweets = _read(TOXICITY / "davidson_twitter_hate_offensive_24783.jsonl.gz")
    for i in range(0, len(tweets), 10):
        if split_of(tweets[i]["id"]) == "dev":
            rows += [{"text": r["text"], "toxic": r["toxic"]} for r in tweets[i : i + 10]]
    return rows


# Sets whose held-out threads hold posts that ``training_labels`` trains on.
OVERLAPS_TRAINING = frozenset({"stormfront_threads_30_posts", "stormfront_hate_threads"})


def twitter_threads() -> list[dict]:
    rows = _read(TOXICITY / "davidson_twitter_hate_offensive_24783.jsonl.gz")
    return [
        {"id": rows[i]["id"], "text": "\n\n".join(r["text"] for r in rows[i : i + 10])}
        for i in range(0, len(rows), 10)
    ]


def clean_web() -> list[dict]:
    paths = (
        WEB / "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
        WEB / "cc_dolma_ccnet_head_and_provided_30docs.jsonl.gz",
    )
    docs = []
    for path in paths:
        for i, row in enumerate(_read(path)):
            if (row.get("text") or "").strip():
                docs.append({"id": f"{path.name}:{i}", "text": row["text"]})
    return docs


def violent_news() -> list[dict]:
    rows = _read(WEB / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz")
    return [
        {"id": row["id"], "text": row["text"]}
        for row in rows
        if len(_VIOLENT.findall(row["text"])) >= 2
    ]


def all_news() -> list[dict]:
    rows = _read(WEB / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz")
    return [{"id": row["id"], "text": row["text"]} for row in rows]


def books() -> list[dict]:
    rows = _read(DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz")
    return [{"id": row["id"], "text": row["text"]} for row in rows]


def toxicity_sets() -> dict[str, tuple[bool, list[dict]]]:
    """name -> (is_toxic, documents)."""
    return {
        "stormfront_threads": (True, stormfront_threads(hate_only=False)),
        "stormfront_threads_30_posts": (True, stormfront_threads(hate_only=False, per_thread=30)),
        "stormfront_forum_pages": (True, stormfront_threads(hate_only=False, page_lines=True)),
        "stormfront_hate_threads": (True, stormfront_threads(hate_only=True)),
        "twitter_threads": (True, twitter_threads()),
        "clean_web": (False, clean_web()),
        "violent_news": (False, violent_news()),
        "all_reuters_news": (False, all_news()),
        "gutenberg_books": (False, books()),
    }
