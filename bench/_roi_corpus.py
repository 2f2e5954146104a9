"""The corpus of ``bench/data_roi.py``: five real sources from ``../shared/data`` cut into shard
groups, and seven planted groups (three harmful that pass the filters, four meant to help).

    corpus = build_corpus(Path("/tmp/roi/corpus"), seed=0)
    corpus.base            # {"news": ".../news-0000/documents.parquet", ...}  the admitted corpus
    corpus.planted         # {"news-0001": PlantedGroup(kind="helpful", ...), ...}

Sources (each document's id is ``doc_id`` of its text, as the ingest stage makes it):

- ``news``  Reuters-21578 articles;
- ``books`` 13 Gutenberg books cut into ~2,500-character chunks at paragraph breaks;
- ``web``   the Common Crawl (dolma) segment's pages;
- ``code``  the CPython 3.11 standard library;
- ``wiki``  206 English Wikipedia pages, wikitext markup stripped, cut like the books.

Each source's documents are ordered by a seeded hash of their id and cut by characters: the
first ``BASE_CHARS[source]`` make ``<source>-0000`` (the admitted corpus and the experiment
basis; books dominate it), the next ``HELPFUL_CHARS`` of news, web, code and wiki make the
helpful groups ``<source>-0001`` (clean text of sources the validation data measures, which the
admitted corpus has little of; whether each one helps is settled by larger runs,
``data_roi.py --truth-at-scale``), and what is left of the books feeds the harmful generators,
each labelled ``books`` (a new crawl of book text that every filter keeps):

- ``shuffled-0000``: held-out book sentences with their words shuffled (the first word
  capitalised, the final punctuation kept);
- ``bigram-0000``: sentences sampled from the word-bigram statistics of the admitted corpus's
  prose (news, books, web, wiki);
- ``nearcopy-0000``: ``NEARCOPY_DOCS`` held-out book passages (1,500-4,000 characters), each
  repeated ``NEARCOPY_COPIES`` times with ~4% of its words replaced (a mirror farm: copies of
  one passage share ~half their 5-word shingles, under dedup's Jaccard 0.8).

Why books: a dev run on a code-heavy corpus (code 46%) found that any English text, shuffled
or not, lowered mean bits per byte there (it displaced code), and shuffled *news* helped a
corpus short of news (its vocabulary); garbage drawn from the dominant prose source tests
word order, not vocabulary. See bench/RESULTS.md.

Two more harmful groups damage text while keeping its vocabulary, of a source the corpus is
short of (news), where "any English lowers English bits per byte" bites hardest:

- ``noisy-0000``: held-out news stories with ``NOISY_SHARE`` of their letters replaced by
  other letters (typing noise, OCR garbage);
- ``shuffled-0001``: held-out news sentences with their words shuffled.

**Targets** (``corpus.targets``, the yardsticks of the issue: clean text of each kind, at least
``TARGET_DOCS`` documents in one language, in no group): held-out news stories, book chunks,
wiki chunks and standard-library files, and for web the hand-corrected main text of Dragnet's
415 test pages (English news and blogs of another crawl: ``extraction/``).

**References** (``corpus.references``: raw documents, cleaned by ``data_roi.py`` like every
group): where the admitted corpus's reserve of a source is thinner than what a reference arm
trains on (news and web: the reference read its ~43k-token reserve three times over and could
not tell clean text from its floor), more text of that kind tops it up, as a user would give
it (a target with ``reference_share`` 1.0), cleaned as the corpus is: the reference is clean
data of the group's kind, not of the yardstick's (raw Reuters, or Dragnet's own pages, would
share the yardstick's make-up and look far better than any group). For news
``REFERENCE_CHARS`` of other held-out stories; for web the pages of trafilatura's evaluation
set (another crawl: ``web/html/``), extracted by ``pretrain.data.extract`` (its English pages
are kept after cleaning, as the group's).

Nothing here is copied into the repository: the bench reads ``../shared/data`` at run time.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import itertools
import json
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table

SOURCES = ("news", "books", "web", "code", "wiki")
# web: the filter stage keeps about a third of these crawl pages (the pools hold what it kept)
BASE_CHARS = {"books": 4_200_000, "code": 1_500_000, "wiki": 500_000, "news": 500_000,
              "web": 1_400_000}  # fmt: skip
TARGET_DOCS = 400  # per kind (web: Dragnet's 415 test pages)
REFERENCE_CHARS = 600_000  # raw held-out news stories that top up the news reserve
NOISY_SHARE = 0.15  # of a noisy group's letters, replaced
HELPFUL_SOURCES = ("news", "web", "code", "wiki")
HELPFUL_CHARS = 800_000
HARMFUL_CHARS = 800_000
NEARCOPY_DOCS = 3
NEARCOPY_COPIES = 130
CHUNK_CHARS = 2_500

_FILES = {
    "news": "web/news/reuters21578_apte_nltk_10788docs.jsonl.gz",
    "books": "books/nltk_gutenberg_selections_2008.jsonl.gz",
    "web": "web/cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
    "code": "code/python3.11.7_stdlib_1790files.jsonl.zst",
    "wiki": "books/enwiki_2016_pages-articles1_shortened_206pages.xml.bz2",
}
_WEB_TARGET = "extraction/dragnet_test_415pages.jsonl.gz"  # gold main text, another crawl
_WEB_REFERENCE = "web/html/trafilatura_tests_cache_eval_1033pages.tar.zst"  # raw HTML pages


@dataclass(frozen=True)
class PlantedGroup:
    group: str
    source: str
    kind: str  # "helpful" | "harmful"
    how: str  # one line: what it is
    path: str  # its documents.parquet


@dataclass(frozen=True)
class Corpus:
    base: dict[str, str]  # source -> documents.parquet of <source>-0000
    planted: dict[str, PlantedGroup]
    chars: dict[str, int]  # group -> characters
    targets: dict[str, str]  # source -> a JSONL target file of clean text of that kind
    references: dict[str, str]  # source -> raw documents.parquet of more text of that kind


def _jsonl(path: Path) -> list[dict]:
    if path.suffix == ".zst":
        import zstandard

        with path.open("rb") as raw:
            text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), "utf-8")
            return [json.loads(line) for line in text if line.strip()]
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` cut at blank lines into pieces of about ``size`` characters."""
    out, current = [], []
    length = 0
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        current.append(para)
        length += len(para)
        if length >= size:
            out.append("\n\n".join(current))
            current, length = [], 0
    if current:
        out.append("\n\n".join(current))
    return out


_WIKI_DROP = [
    re.compile(r"<!--.*?-->", re.S),
    re.compile(r"<ref[^>]*/>"),
    re.compile(r"<ref[^>]*>.*?</ref>", re.S),
    re.compile(r"\{\|.*?\|\}", re.S),  # tables
    re.compile(r"\[\[(?:File|Image|Category):[^\[\]]*(?:\[\[[^\]]*\]\][^\[\]]*)*\]\]"),
    re.compile(r"<[^>]+>"),
]


def clean_wikitext(text: str) -> str:
    for pattern in _WIKI_DROP[:4]:
        text = pattern.sub("", text)
    while True:  # templates nest: remove innermost first
        stripped = re.sub(r"\{\{[^{}]*\}\}", "", text)
        if stripped == text:
            break
        text = stripped
    for pattern in _WIKI_DROP[4:]:
        text = pattern.sub("", text)
    text = re.sub(r"\[\[[^\]|]*\|([^\]]*)\]\]", r"\1", text)
    text = re.sub(r"\[\[([^\]]*)\]\]", r"\1", text)
    text = re.sub(r"\[https?://\S+ ([^\]]*)\]", r"\1", text)
    text = re.sub(r"\[https?://\S+\]", "", text)
    text = re.sub(r"'{2,}", "", text)
    text = re.sub(r"^=+\s*(.*?)\s*=+\s*$", r"\1", text, flags=re.M)
    text = re.sub(r"^[*#:;]+\s*", "", text, flags=re.M)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _wiki_pages(path: Path) -> list[tuple[str, str]]:
    import xml.etree.ElementTree as ET

    ns = "{http://www.mediawiki.org/xml/export-0.10/}"
    pages = []
    with bz2.open(path, "rb") as f:
        for _, elem in ET.iterparse(f):
            if elem.tag != ns + "page":
                continue
            title = elem.findtext(ns + "title") or ""
            text = elem.findtext(f"{ns}revision/{ns}text") or ""
            if elem.findtext(ns + "ns") == "0" and not text.lstrip().upper().startswith(
                "#REDIRECT"
            ):
                pages.append((title, clean_wikitext(text)))
            elem.clear()
    return pages


def load_source(data: Path, source: str) -> list[dict]:
    """Every document of ``source`` as ``{"id", "text", "source", "url"}`` rows."""
    path = data / _FILES[source]
    if source == "wiki":
        pieces = [(f"wiki/{t}#{i}", c) for t, page in _wiki_pages(path)
                  for i, c in enumerate(_chunks(page))]  # fmt: skip
    elif source == "books":
        pieces = [
            (f"{r['id']}#{i}", c) for r in _jsonl(path) for i, c in enumerate(_chunks(r["text"]))
        ]
    elif source == "code":
        pieces = [(r["path"], r["text"]) for r in _jsonl(path)]
    else:
        pieces = [(str(r["id"]), r["text"]) for r in _jsonl(path)]
    rows = []
    for url, text in pieces:
        text = text.strip()
        if len(text) >= 200:
            rows.append(
                {"id": doc_id(text, source, url), "text": text, "source": source, "url": url}
            )
    return rows


def _order(rows: list[dict], seed: int) -> list[dict]:
    key = lambda r: hashlib.sha256(f"{seed}:{r['id']}".encode()).hexdigest()  # noqa: E731
    return sorted(rows, key=key)


def _take(rows: list[dict], chars: int) -> tuple[list[dict], list[dict]]:
    total = 0
    for i, row in enumerate(rows):
        if total >= chars:
            return rows[:i], rows[i:]
        total += len(row["text"])
    return rows, []


_SENTENCE = re.compile(r"[^.!?]+[.!?]")


def shuffled_sentences(rows: list[dict], chars: int, rng: random.Random) -> list[str]:
    """Documents of real sentences with their words shuffled."""
    docs = []
    total = 0
    for row in rows:
        out = []
        for sentence in _SENTENCE.findall(row["text"].replace("\n", " ")):
            words, end = sentence[:-1].split(), sentence[-1]
            if len(words) < 4:
                continue
            rng.shuffle(words)
            out.append(" ".join([words[0].capitalize(), *words[1:]]) + end)
        if out:
            docs.append(" ".join(out))
            total += len(docs[-1])
        if total >= chars:
            break
    return docs


def bigram_documents(texts: list[str], chars: int, rng: random.Random) -> list[str]:
    """Documents sampled from the word-bigram statistics of ``texts`` (``<s>`` starts and a
    word ending in . ! or ? ends a sentence)."""
    follow: dict[str, Counter[str]] = defaultdict(Counter)
    for text in texts:
        for sentence in _SENTENCE.findall(text.replace("\n", " ")):
            words = sentence.split()
            for a, b in zip(["<s>", *words], words, strict=False):
                follow[a][b] += 1
    table = {w: (list(c), list(itertools.accumulate(c.values()))) for w, c in follow.items()}
    docs, total = [], 0
    while total < chars:
        sentences = []
        for _ in range(rng.randint(8, 30)):
            word, words = "<s>", []
            while len(words) < 60:
                choices, cumulative = table.get(word, table["<s>"])
                word = rng.choices(choices, cum_weights=cumulative)[0]
                words.append(word)
                if word[-1] in ".!?":
                    break
            sentences.append(" ".join(words))
        docs.append(" ".join(sentences))
        total += len(docs[-1])
    return docs


def noisy_letters(rows: list[dict], chars: int, rng: random.Random) -> list[str]:
    """Documents with ``NOISY_SHARE`` of their letters replaced by random letters (case kept)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    docs, total = [], 0
    for row in rows:
        out = []
        for ch in row["text"]:
            if ch.isalpha() and ch.isascii() and rng.random() < NOISY_SHARE:
                new = rng.choice(letters)
                out.append(new.upper() if ch.isupper() else new)
            else:
                out.append(ch)
        docs.append("".join(out))
        total += len(docs[-1])
        if total >= chars:
            break
    return docs


def extracted_pages(data: Path) -> list[str]:
    """The main text of trafilatura's evaluation pages (``_WEB_REFERENCE``), extracted by the
    ingest stage's extractor (at least 200 characters)."""
    import tarfile

    import zstandard

    from pretrain.data.encoding import decode_bytes
    from pretrain.data.extract import extract_main_text

    texts = []
    with (data / _WEB_REFERENCE).open("rb") as raw:
        stream = zstandard.ZstdDecompressor().stream_reader(raw)
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                page = tar.extractfile(member) if member.name.endswith(".html") else None
                decoded = decode_bytes(page.read()) if page is not None else None
                if decoded is not None:
                    text = extract_main_text(decoded[0])
                    if len(text) >= 200:
                        texts.append(text)
    return texts


def _write_target(texts: list[str], where: Path) -> str:
    where.parent.mkdir(parents=True, exist_ok=True)
    with where.open("w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps({"text": text}) + "\n")
    return str(where)


def near_copies(rows: list[dict], rng: random.Random) -> list[str]:
    """``NEARCOPY_COPIES`` copies of each of ``NEARCOPY_DOCS`` documents of 1,500-4,000
    characters, ~4% of words replaced by other words of the same document."""
    docs = []
    picked = [r for r in rows if 1_500 <= len(r["text"]) <= 4_000][:NEARCOPY_DOCS]
    for row in picked:
        words = row["text"].split(" ")
        for _ in range(NEARCOPY_COPIES):
            copy = list(words)
            for i in rng.sample(range(len(copy)), k=max(1, len(copy) // 25)):
                copy[i] = rng.choice(words)
            docs.append(" ".join(copy))
    return docs


def _write(rows: list[dict], out: Path) -> str:
    path = out / "documents.parquet"
    storage.write_table(documents_table(rows), str(path))
    return str(path)


def _rows(texts: list[str], source: str, group: str) -> list[dict]:
    return [{"id": doc_id(t, source, f"{group}/{i}"), "text": t, "source": source,
             "url": f"{group}/{i}"} for i, t in enumerate(texts)]  # fmt: skip


def build_corpus(data: Path, out: Path, *, seed: int = 0) -> Corpus:
    """Write every group's ``documents.parquet`` under ``out/<group>/`` (see module doc)."""
    rng = random.Random(seed)
    base, planted, rest = {}, {}, {}
    groups: dict[str, list[dict]] = {}
    targets: dict[str, str] = {}
    for source in SOURCES:
        ordered = _order(load_source(data, source), seed)
        groups[f"{source}-0000"], ordered = _take(ordered, BASE_CHARS[source])
        if source in HELPFUL_SOURCES:
            groups[f"{source}-0001"], ordered = _take(ordered, HELPFUL_CHARS)
        if source != "web":  # web: another crawl's pages (below)
            picked, ordered = ordered[:TARGET_DOCS], ordered[TARGET_DOCS:]
            targets[source] = _write_target([r["text"] for r in picked],
                                            out / "targets" / f"{source}.jsonl")  # fmt: skip
        rest[source] = ordered
    web = [r["text"] for r in _jsonl(data / _WEB_TARGET) if len(r.get("text") or "") >= 200]
    targets["web"] = _write_target(web, out / "targets" / "web.jsonl")
    # the middle of the held-out news (the harmful generators read its two ends), and another
    # crawl's pages for web
    picked, _ = _take(rest["news"][len(rest["news"]) // 3 :], REFERENCE_CHARS)
    references = {
        "news": _write(_rows([r["text"] for r in picked], "news", "news-reference"),
                       out / "news-reference"),
        "web": _write(_rows(extracted_pages(data), "web", "web-reference"), out / "web-reference"),
    }  # fmt: skip
    prose = [r["text"] for s in ("news", "books", "web", "wiki") for r in groups[f"{s}-0000"]]
    harmful = {
        "shuffled-0000": ("books", "held-out book sentences, words shuffled",
                          shuffled_sentences(rest["books"], HARMFUL_CHARS, rng)),
        "bigram-0000": ("books", "sampled from the admitted prose's word bigrams",
                        bigram_documents(prose, HARMFUL_CHARS, rng)),
        "nearcopy-0000": ("books", f"{NEARCOPY_DOCS} held-out book passages x "
                          f"{NEARCOPY_COPIES} near-copies (~4% words replaced)",
                          near_copies(rest["books"][::-1], rng)),
        "noisy-0000": ("news", f"held-out news, {NOISY_SHARE:.0%} of letters replaced",
                       noisy_letters(rest["news"], HARMFUL_CHARS, rng)),
        "shuffled-0001": ("news", "held-out news sentences, words shuffled",
                          shuffled_sentences(rest["news"][::-1], HARMFUL_CHARS, rng)),
    }  # fmt: skip
    for group, (source, _, texts) in harmful.items():
        groups[group] = _rows(texts, source, group)
    chars = {g: sum(len(r["text"]) for r in rows) for g, rows in groups.items()}
    for group, rows in groups.items():
        path = _write(rows, out / group)
        source = rows[0]["source"]
        if group.endswith("-0000") and group.split("-")[0] in SOURCES:
            base[source] = path
        elif group in harmful:
            planted[group] = PlantedGroup(group=group, source=source, kind="harmful",
                                          how=harmful[group][1], path=path)  # fmt: skip
        else:
            planted[group] = PlantedGroup(
                group=group, source=source, kind="helpful",
                how=f"{chars[group]:,} more characters of clean {source}", path=path,
            )  # fmt: skip
    return Corpus(base=base, planted=planted, chars=chars, targets=targets,
                  references=references)  # fmt: skip


def fingerprint() -> str:
    """The source of everything that decides the corpus (a changed cut or generator: rebuild)."""
    import inspect

    parts = [load_source, build_corpus, shuffled_sentences, bigram_documents, near_copies,
             noisy_letters, _write_target, clean_wikitext, _chunks, _take, _order, _rows,
             _wiki_pages, extracted_pages]  # fmt: skip
    constants = (SOURCES, BASE_CHARS, HELPFUL_SOURCES, HELPFUL_CHARS, HARMFUL_CHARS,
                 NEARCOPY_DOCS, NEARCOPY_COPIES, CHUNK_CHARS, TARGET_DOCS, NOISY_SHARE,
                 REFERENCE_CHARS)  # fmt: skip
    return repr(constants) + "".join(inspect.getsource(f) for f in parts)


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(max(0, len(words) - n + 1))}


def sibling_jaccard(path: str, pairs: int = 50, seed: int = 0) -> float:
    """Mean 5-word-shingle Jaccard of ``pairs`` random pairs of documents of one group with the
    same origin (``url`` without its copy number): what MinHash dedup (threshold 0.8) sees."""
    table = storage.read_table(path, columns=["text"])
    texts = table["text"].to_pylist()
    rng = random.Random(seed)
    per = NEARCOPY_COPIES
    values = []
    for _ in range(pairs):
        origin = rng.randrange(len(texts) // per)
        a, b = rng.sample(range(origin * per, origin * per + per), 2)
        sa, sb = _shingles(texts[a]), _shingles(texts[b])
        values.append(len(sa & sb) / max(1, len(sa | sb)))
    return sum(values) / len(values)


def filter_check(documents: Path, out: Path) -> dict:
    """The real filter stage (``FilterConfig()``) on one group: kept share, drop reasons, its
    noise risk (no dedup here: duplicate share 0) and its cleaning cost (CPU seconds)."""
    import dataclasses
    import time

    from pretrain.experiments.admission import CleaningCost, noise_from_stats
    from pretrain.filters.config import FilterConfig
    from pretrain.filters.pipeline import filter_shard

    cached = out / "check.json"
    if cached.exists():
        saved = json.loads(cached.read_text())
    else:
        cpu = time.process_time()
        stats = dataclasses.asdict(filter_shard(str(documents), str(out), FilterConfig()))
        saved = {"stats": stats, "cpu_s": time.process_time() - cpu,
                 "bytes": documents.stat().st_size}  # fmt: skip
        storage.write_json(saved, str(cached))
    stats = saved["stats"]
    kept = int(stats["kept"])
    return {
        "kept_share": kept / max(1, int(stats["documents_in"])),
        "dropped": dict(stats["dropped"]),
        "noise": noise_from_stats(stats, {"removed": {}, "documents_in": kept}),
        "cost": CleaningCost(
            cpu_seconds=saved["cpu_s"],
            raw_bytes_processed=saved["bytes"],
            raw_bytes_total=saved["bytes"],
        ),  # fmt: skip
    }
