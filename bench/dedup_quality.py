"""Precision and recall of our MinHash-LSH dedup against brute force, on real text.

Truth: every pair of documents whose *normalized* word-5-gram Jaccard (character 5-grams for
CJK/Thai) is ``>= 0.8``, computed exactly over all pairs with a sparse matrix product on
Python sets of shingle strings — independent of our hashing and of polars. Normalization:
NFKC, lower-case, Unicode punctuation and symbols dropped, digit runs -> "0", whitespace
collapsed (``unicodedata`` + ``re``; what near-duplicate means for a reader).

Corpus: news (Reuters re-sends are natural near duplicates), Common Crawl, OSCAR, Chinese
reviews, plus pairs built here from real text (never written to the repository):

- ``books``: each Gutenberg book of ``../shared/data/books/``, a *second edition* (curly
  quotes, em dashes, re-wrapped lines, other page numbers, 1% of words changed) and a
  *re-formatted copy* (one line per paragraph, "fi"/"fl" ligatures, dashes as " - "); and a
  *partial copy* (the first quarter of the book), whose containment should be reported;
- ``zh_punct``: Chinese reviews whose punctuation was switched between full and half width.

Ours: exact-key groups (all pairs) plus LSH candidates that pass verification, for
normalization v2 (default) and v1 (before issue 14) and each verification mode::

    .venv/bin/python bench/dedup_quality.py            # ~8k docs, ~1-2 minutes on 2 cores

Ends with one JSON line.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dedup_corpus import DATA, available, load_corpus, write_documents  # noqa: E402
from pretrain.data.schema import doc_id  # noqa: E402
from pretrain.dedup.clusters import find_pairs, open_shards  # noqa: E402
from pretrain.dedup.config import DedupConfig  # noqa: E402
from pretrain.dedup.minhash import compute_signatures  # noqa: E402

THRESHOLD = 0.8
CJK = re.compile("[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
BOOKS = DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"
MIX = {"news": 4000, "cc": 700, "oscar": 650, "zh_reviews": 1500}
RUNS = [("v2", "jaccard"), ("v2", "signature"), ("v2", "none"), ("v1", "jaccard")]
FULL_WIDTH = {",": "\uff0c", "!": "\uff01", "?": "\uff1f", ":": "\uff1a", ";": "\uff1b",
              "(": "\uff08", ")": "\uff09", ".": "\u3002"}  # fmt: skip


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(c)[0] in "PS" else c for c in text)
    return " ".join(re.sub(r"\d+", "0", text).split())


def shingle_set(text: str, n: int = 5) -> set[str]:
    norm = normalize(text)
    letters = len(norm) - norm.count(" ")
    if letters and len(CJK.findall(norm)) >= 0.3 * letters:
        tokens = list(norm.replace(" ", ""))
    else:
        tokens = norm.split()
    if not tokens:
        return set()
    n = min(n, len(tokens))
    return {"\x1f".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def second_edition(text: str, rng: random.Random) -> str:
    text = text.replace("--", "\u2014")
    quotes = iter(["\u201c", "\u201d"] * (text.count('"') // 2 + 1))
    text = re.sub('"', lambda _: next(quotes), text)
    words = [
        rng.choice(["the", "a", "and", "then"]) if rng.random() < 0.01 else w
        for w in re.sub(r"\d+", lambda m: str(int(m.group()) + 2), text).split()
    ]
    lines, line = [], []
    for word in words:
        line.append(word)
        if sum(map(len, line)) + len(line) > 60:
            lines.append(" ".join(line))
            line = []
    return "\n".join([*lines, " ".join(line)])


def reformatted(text: str) -> str:
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    text = "\n".join(p for p in paragraphs if p)
    return text.replace("fi", "\ufb01").replace("fl", "\ufb02").replace("--", " - ")


def planted_documents(corpus: list[dict]) -> tuple[list[dict], list[tuple[str, str]]]:
    """Edition, re-formatted and partial copies of the books; punctuation-switched reviews.
    Returns the documents and the (partial, book) id pairs expected as containment."""
    rng = random.Random(14)
    out, partial_pairs = [], []

    def doc(text: str, source: str, url: str) -> dict:
        return {"id": doc_id(text, source, url), "text": text, "source": source, "url": url,
                "num_chars": len(text), "quality_score": 0.5}  # fmt: skip

    with gzip.open(BOOKS, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            text, name = record["text"], record["id"]
            book = doc(text, "books", name)
            partial = doc(text[: len(text) // 4], "books", f"{name}#partial")
            out += [book, doc(second_edition(text, rng), "books", f"{name}#ed2"),
                    doc(reformatted(text), "books", f"{name}#reformatted"), partial]  # fmt: skip
            partial_pairs.append((partial["id"], book["id"]))
    reviews = [d for d in corpus if d["source"] == "zh_reviews" and len(d["text"]) >= 40]
    for d in reviews[:150]:
        text = "".join(FULL_WIDTH.get(c, c) for c in d["text"])
        if text == d["text"]:
            text = "".join({v: k for k, v in FULL_WIDTH.items()}.get(c, c) for c in d["text"])
        out.append(doc(text, "zh_punct", d["url"] + "#punct"))
    return out, partial_pairs


def brute_force_pairs(texts: list[str]) -> set[tuple[int, int]]:
    sets = [shingle_set(t) for t in texts]
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for doc, shingles in enumerate(sets):
        for s in shingles:
            rows.append(doc)
            cols.append(vocab.setdefault(s, len(vocab)))
    matrix = sp.csr_matrix((np.ones(len(rows), np.int32), (rows, cols)), (len(sets), len(vocab)))
    inter = sp.triu(matrix @ matrix.T, k=1).tocoo()
    sizes = np.array([len(s) for s in sets])
    union = sizes[inter.row] + sizes[inter.col] - inter.data
    keep = inter.data / union >= THRESHOLD
    return set(zip(inter.row[keep].tolist(), inter.col[keep].tolist(), strict=True))


def our_pairs(sig_uri: str, config: DedupConfig) -> tuple[set, np.ndarray]:
    """Verified LSH pairs plus every pair inside an exact-key group; containment rows."""
    shards, _ = open_shards([sig_uri], config)
    _, near, contained = find_pairs(shards, config)
    pairs = {tuple(p) for p in near.tolist()}
    exact = pq.read_table(sig_uri, columns=["exact_hash"]).column(0).to_numpy()
    groups: dict[int, list[int]] = {}
    for row, key in enumerate(exact.tolist()):
        groups.setdefault(key, []).append(row)
    for group in groups.values():  # exact pairs are stars in our output: expand to all pairs
        pairs |= {(a, b) for i, a in enumerate(group) for b in group[i + 1 :]}
    return pairs, contained


def main() -> None:
    if not (available() and BOOKS.exists()):
        raise SystemExit("../shared/data is not present: nothing to measure")
    corpus = [d for d in load_corpus(MIX) if normalize(d["text"])]  # no text, no Jaccard
    planted, partial_pairs = planted_documents(corpus)
    docs = corpus + planted
    texts = [d["text"] for d in docs]
    sources = [d["source"] for d in docs]
    started = time.perf_counter()
    truth = brute_force_pairs(texts)
    brute_s = time.perf_counter() - started
    ids = [d["id"] for d in docs]
    index = {doc_id: i for i, doc_id in enumerate(ids)}
    expected_containment = {(index[a], index[b]) for a, b in partial_pairs}

    by_source: dict[str, int] = {}
    for _, b in truth:  # the later document: a planted copy is always after its original
        by_source[sources[b]] = by_source.get(sources[b], 0) + 1
    results: dict = {"documents": len(docs), "true_pairs": len(truth),
                     "true_pairs_by_source": by_source, "brute_force_s": round(brute_s, 2)}  # fmt: skip
    print(
        f"documents {len(docs)}, true pairs (normalized J >= {THRESHOLD}) {len(truth)}: {by_source}"
    )
    print(f"{'run':<12} {'pairs':>7} {'precision':>10} {'recall':>8} {'books':>6} {'zh_punct':>8} "
          f"{'news':>6} {'contain':>8} {'seconds':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"{tmp}/docs/documents.parquet"
        write_documents(docs, uri)
        for normalization, verify in RUNS:
            config = DedupConfig(verify=verify, normalization=normalization)
            sig = f"{tmp}/sig-{normalization}/signatures.parquet"
            if not Path(sig).exists():
                compute_signatures(uri, sig, config)
            started = time.perf_counter()
            ours, contained = our_pairs(sig, config)
            seconds = time.perf_counter() - started
            hit = ours & truth
            listed = {(int(a), int(b)) for a, b, _ in contained.tolist()}
            run = {
                "pairs": len(ours),
                "precision": round(len(hit) / len(ours), 4) if ours else 1.0,
                "recall": round(len(hit) / len(truth), 4) if truth else 1.0,
                "recall_by_source": {
                    src: round(sum(sources[b] == src for _, b in hit) / n, 4)
                    for src, n in by_source.items()
                },
                "containment_listed": len(listed),
                "partial_books_found": len(listed & expected_containment),
                "seconds": round(seconds, 2),
            }
            name = f"{normalization}_{verify}"
            results[name] = run
            r = run["recall_by_source"]
            print(f"{name:<12} {run['pairs']:>7} {run['precision']:>10} {run['recall']:>8} "
                  f"{r.get('books', 0):>6} {r.get('zh_punct', 0):>8} {r.get('news', 0):>6} "
                  f"{run['partial_books_found']:>4}/{len(expected_containment):<3} "
                  f"{run['seconds']:>8}")  # fmt: skip
    print(json.dumps({"bench": "dedup_quality", **results}))


if __name__ == "__main__":
    main()
