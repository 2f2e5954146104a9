"""Document sets for the toxicity benchmark and model selection, built from ../shared/data.

Toxic sets are *documents* (threads and pages), not sentences, because the filter judges whole
documents; ``bench/_toxicity_loso.py`` (each source held out), ``bench/_toxicity_clean.py``
(clean calibration and evaluation pages) and ``bench/cleaning_toxicity.py`` build on these.
Splits come from :mod:`_toxicity_data` (the units the shipped model was trained on are
``train``; on a source left out of training every document counts):

- ``stormfront_threads()``: 10 consecutive posts of one Stormfront subforum (sentences of a
  post joined, posts separated by blank lines): every thread of the forum, including the many
  without a sentence its annotators labelled hate; a third of a 30-post split block
  (``per_thread=30``: the whole block; ``hate_only=True``: only posts with a ``hate`` sentence);
  ``page=True``: the threads as a scraped forum page shows them (a user line, a post count,
  "Quote" and "Reply" around each post, every third post quoting the one before).
- ``twitter_threads()``: 10 consecutive Davidson et al. tweets (mostly offensive, as sampled).
- ``implicit_statements()``: ToxiGen's hateful seed statements and HateCheck's implicit
  derogation cases (``derog_impl_h``), one statement a document; mostly no slur, no profanity.
- ``statement_threads(hateful=5)``: 10 posts, 5 of those statements among 5 neutral statements
  about the same kinds of groups (ToxiGen neutral, HateCheck ``ident_neutral_nh`` /
  ``ident_pos_nh``), 100 per split, drawn with a fixed seed from the split's statements;
  ``hateful=0``: threads of neutral statements only (a fairness check).

Clean documents (never trained on; ``document_split``: ``heldout`` is a fifth of them by id, the
rest is ``dev``): ``clean_web()`` (Common Crawl pages of the dolma and CCNet-head samples, all
languages), ``reuters()`` (Reuters-21578, research use only: evaluation), ``pages()`` (the
extraction set's real 2012 pages with their gold main text, AGPL data: evaluation only;
``news_only=True``: news outlets' pages about violence or politics), ``package_docs()`` (the
READMEs and licences of the installed Python packages, the demo's ``embedded`` prose).
"""

from __future__ import annotations

import random

from _toxicity_data import (
    DATA,
    WEB,
    davidson_blocks,
    hatecheck_rows,
    read,
    split_of,
    stormfront_blocks,
    toxigen_rows,
)

from tests.helpers.toxicity_splits import NEWS_OUTLETS, POLITICAL, VIOLENT

__all__ = ["DATA", "WEB", "split_of", "document_split", "clean_documents"]
_read = read  # the PII part of the benchmark reads Reuters through this name
THREADS_PER_SPLIT = 100


def document_split(key: str) -> str:
    """A clean document's split: ``heldout`` or ``dev`` (nothing trains on clean documents)."""
    return "heldout" if split_of(key) == "heldout" else "dev"


def post_text(rows: list[dict]) -> str:
    return " ".join(r["text"] for r in rows)


def forum_page(posts: list[tuple[str, list[dict]]]) -> str:
    """A scraped forum page: user lines, post counts, quotes and buttons around the posts."""
    parts = []
    for i, (post_id, rows) in enumerate(posts):
        quote = ""
        if i % 3 == 2:
            before = posts[i - 1][1]
            quote = (
                f"Quote:\nOriginally Posted by user{before[0]['user_id']}\n{before[0]['text']}\n"
            )
        parts.append(
            f"user{rows[0]['user_id']}\nPosts: {int(post_id) % 4000:,}\n{quote}{post_text(rows)}\n"
            "Reply With Quote"
        )
    return "\n\n".join(parts)


def stormfront_threads(*, per_thread: int = 10, page: bool = False, hate_only: bool = False):
    """Threads cut from the 30-post split blocks (a thread never crosses a block)."""
    threads = []
    for key, split, posts in stormfront_blocks():
        if hate_only:
            posts = [p for p in posts if any(r["label"] == "hate" for r in p[1])]
        for start in range(0, len(posts), per_thread):
            chunk = posts[start : start + per_thread]
            text = forum_page(chunk) if page else "\n\n".join(post_text(rows) for _, rows in chunk)
            threads.append({"id": f"{key}#{start // per_thread}", "split": split, "text": text})
    return threads


def twitter_threads() -> list[dict]:
    return [
        {"id": key, "split": split, "text": "\n\n".join(r["text"] for r in tweets)}
        for key, split, tweets in davidson_blocks()
    ]


def group_statements() -> tuple[list[dict], list[dict]]:
    """(implicit hate, neutral about groups) statements, each with its split."""
    tg, hc = toxigen_rows(), hatecheck_rows()
    hate = [r for r in tg if r["toxic"]] + [r for r in hc if r["functionality"] == "derog_impl_h"]
    neutral = [r for r in tg if not r["toxic"]]
    neutral += [r for r in hc if r["functionality"] in ("ident_neutral_nh", "ident_pos_nh")]
    return hate, neutral


def implicit_statements() -> list[dict]:
    hate, _ = group_statements()
    return [{"id": r["id"], "split": r["split"], "text": r["text"]} for r in hate]


def statement_threads(*, hateful: int) -> list[dict]:
    """THREADS_PER_SPLIT threads of 10 statements per split, ``hateful`` of them implicit hate."""
    hate, neutral = group_statements()
    rng = random.Random(0)
    threads = []
    for split in ("train", "dev", "heldout"):
        pool_h = [r["text"] for r in hate if r["split"] == split]
        pool_n = [r["text"] for r in neutral if r["split"] == split]
        for n in range(THREADS_PER_SPLIT):
            posts = rng.sample(pool_h, hateful) + rng.sample(pool_n, 10 - hateful)
            rng.shuffle(posts)
            threads.append({"id": f"statements:{split}:{hateful}:{n}", "split": split,
                            "text": "\n\n".join(posts)})  # fmt: skip
    return threads


def clean_documents(rows: list[dict], prefix: str = "") -> list[dict]:
    """Records with text as clean documents, each with its ``split`` (``document_split``)."""
    return [
        {"id": prefix + r["id"], "split": document_split(prefix + r["id"]), "text": r["text"]}
        for r in rows
        if (r.get("text") or "").strip()
    ]


def clean_web() -> list[dict]:
    names = (
        "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
        "cc_dolma_ccnet_head_and_provided_30docs.jsonl.gz",
    )
    return clean_documents(
        [{"id": f"{name}:{i}", "text": r.get("text")} for name in names
         for i, r in enumerate(read(WEB / name))]
    )  # fmt: skip


def reuters() -> list[dict]:
    return clean_documents(read(WEB / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz"))


def pages(*, news_only: bool) -> list[dict]:
    rows = read(DATA / "extraction" / "dragnet_test_415pages.jsonl.gz")
    if news_only:
        rows = [
            r for r in rows
            if NEWS_OUTLETS.match(r["url"] or "")
            and len(VIOLENT.findall(r["text"])) + len(POLITICAL.findall(r["text"])) >= 2
        ]  # fmt: skip
    return clean_documents(rows)


def package_docs() -> list[dict]:
    """The READMEs, changelogs and licence texts of the installed Python packages (the
    ``embedded`` source of the demo): technical prose full of links, badges and markup."""
    from pretrain.data.harvest import discover_embedded
    from pretrain.data.readers import iter_records

    docs = []
    for f in discover_embedded(max_files_per_source=10**6):
        if f.source == "code":
            continue
        for i, record in enumerate(iter_records(f)):
            text = record.get("text") if isinstance(record, dict) else None
            if text and text.strip():
                docs.append({"id": f"{f.uri}:{i}", "text": text})
    return [{**d, "split": document_split(d["id"])} for d in docs]
