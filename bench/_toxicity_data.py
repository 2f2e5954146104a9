"""Labelled toxicity data of ../shared/data and its splits (development only, never the product).

One place decides which labelled text is ``train``, ``dev`` or ``heldout`` (the hash split and
the HateCheck root templates are in ``tests/helpers/toxicity_splits.py``, which
``tests/unit/filters/test_toxicity_real_data.py`` uses too), for the script
that builds the shipped model (``scripts/train_toxicity_model.py``: it trains on ``train``,
calibrates on ``dev``) and for the benchmark (``bench/cleaning_quality.py``: it reports
``heldout``). Splits follow the unit that carries leakage, never the sentence:

- Stormfront: posts of one subforum, in post order, in blocks of 30 (``stormfront:<subforum>:
  <first post>``); the bench's 10-post threads are the thirds of a block, so a held-out thread of
  10 or of 30 posts holds no sentence of a trained post;
- Davidson: blocks of 10 consecutive tweets (the bench's Twitter threads), by the first id;
- HateCheck: the *root* template (``ref_templ_id`` followed back: a spelling variant, negation
  or counter-quote of a template goes with it);
- ToxiGen seed statements: the statement id;
- the clean sets (web pages, news, books): the document id; they are never trained on.

Only sets whose licence lets a model trained on them ship are labelled data here (see NOTICE):
Stormfront (CC BY-SA 3.0 ES), Davidson (MIT), HateCheck (CC BY 4.0), ToxiGen seed statements
(CDLA-Permissive-2.0)::

    from _toxicity_data import labelled, split_of
    train = [r for r in labelled() if r["split"] == "train"]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

from tests.helpers.toxicity_splits import hatecheck_splits, split_of, stormfront_blocks_of

__all__ = ["split_of"]  # the split, defined with the tests' (tests/helpers/toxicity_splits.py)

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TOXICITY = DATA / "toxicity"
WEB = DATA / "web"
STORMFRONT = TOXICITY / "stormfront_hate_speech_10944.jsonl.gz"
DAVIDSON = TOXICITY / "davidson_twitter_hate_offensive_24783.jsonl.gz"
HATECHECK = TOXICITY / "hatecheck_functional_tests_3728.jsonl.gz"
TOXIGEN = TOXICITY / "toxigen_seed_statements_624.jsonl.gz"
LABELLED_FILES = (STORMFRONT, DAVIDSON, HATECHECK, TOXIGEN)  # Wikipedia: WIKIPEDIA below
TWEETS_PER_THREAD = 10


def read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stormfront_blocks() -> list[tuple[str, str, list[tuple[str, list[dict]]]]]:
    """(block key, split, posts) for every block of 30 consecutive posts of a subforum."""
    return stormfront_blocks_of(read(STORMFRONT))


def davidson_blocks() -> list[tuple[str, str, list[dict]]]:
    """(block key, split, tweets) for every 10 consecutive tweets."""
    rows = read(DAVIDSON)
    out = []
    for start in range(0, len(rows), TWEETS_PER_THREAD):
        chunk = rows[start : start + TWEETS_PER_THREAD]
        out.append((chunk[0]["id"], split_of(chunk[0]["id"]), chunk))
    return out


def hatecheck_rows() -> list[dict]:
    """HateCheck cases, each with ``split`` from its root template."""
    rows = read(HATECHECK)
    return [{**r, "split": split} for r, split in zip(rows, hatecheck_splits(rows), strict=True)]


def toxigen_rows() -> list[dict]:
    return [{**r, "split": split_of(r["id"])} for r in read(TOXIGEN)]


def labelled() -> list[dict]:
    """Every labelled unit: ``text``, ``toxic`` (bool), ``source``, ``split``, ``kind``.

    Stormfront ``relation`` and ``idk/skip`` sentences (no binary label) are left out.
    ``kind`` names the HateCheck functionality or the ToxiGen label, for per-kind reports.
    """
    out = []
    for _, split, posts in stormfront_blocks():
        for _, rows in posts:
            out += [
                {"text": r["text"], "toxic": r["toxic"], "source": "stormfront",
                 "split": split, "kind": r["label"]}
                for r in rows if r["toxic"] is not None
            ]  # fmt: skip
    for _, split, tweets in davidson_blocks():
        out += [
            {"text": r["text"], "toxic": r["toxic"], "source": "davidson", "split": split,
             "kind": r["label"]}
            for r in tweets
        ]  # fmt: skip
    out += [
        {"text": r["text"], "toxic": r["toxic"], "source": "hatecheck", "split": r["split"],
         "kind": r["functionality"]}
        for r in hatecheck_rows()
    ]  # fmt: skip
    out += [
        {"text": r["text"], "toxic": r["toxic"], "source": "toxigen", "split": r["split"],
         "kind": r["label"]}
        for r in toxigen_rows()
    ]  # fmt: skip
    return out


WIKIPEDIA = DATA / "books" / "enwiki_2016_pages-articles1_shortened_206pages.xml.bz2"
_MEDIAWIKI = "{http://www.mediawiki.org/xml/export-0.10/}"


def _strip_templates(text: str) -> str:
    """Text outside ``{{...}}`` templates and ``{|...|}`` tables (which nest)."""
    out, depth, i = [], 0, 0
    while i < len(text):
        pair = text[i : i + 2]
        if pair in ("{{", "{|"):
            depth, i = depth + 1, i + 2
        elif depth and pair in ("}}", "|}"):
            depth, i = depth - 1, i + 2
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


def wikitext_paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a wikitext page (links, markup, references, lists dropped)."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>", "", text, flags=re.S)
    text = _strip_templates(text)
    text = re.sub(r"\[\[(?:File|Image|Category|[a-z-]{2,12}):[^\[\]]*(?:\[\[[^\]]*\]\][^\[\]]*)*\]\]",
                  "", text)  # fmt: skip
    text = re.sub(r"\[\[(?:[^\]|]*\|)?([^\]]*)\]\]", r"\1", text)
    text = re.sub(r"\[https?://\S+ ([^\]]*)\]|\[https?://\S+\]", r"\1", text)
    text = re.sub(r"'{2,}|<[^>]+>", "", text)
    lines = (line.strip() for line in text.split("\n"))
    return [
        s
        for s in lines
        if len(s.split()) >= 6 and not s.startswith(("=", "*", "#", ":", ";", "|", "!"))
    ]


def wikipedia_pages() -> list[tuple[str, str, list[str]]]:
    """(title, split, paragraphs) of every article of the Wikipedia sample (no redirects)."""
    import bz2
    import xml.etree.ElementTree as ElementTree

    pages = []
    with bz2.open(WIKIPEDIA) as f:
        for _, element in ElementTree.iterparse(f):
            if element.tag != _MEDIAWIKI + "page":
                continue
            if (
                element.findtext(_MEDIAWIKI + "ns") == "0"
                and element.find(_MEDIAWIKI + "redirect") is None
            ):
                title = element.findtext(_MEDIAWIKI + "title") or ""
                text = element.findtext(f"{_MEDIAWIKI}revision/{_MEDIAWIKI}text") or ""
                pages.append((title, split_of(f"wikipedia:{title}"), wikitext_paragraphs(text)))
            element.clear()
    return pages
