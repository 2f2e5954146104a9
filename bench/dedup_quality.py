"""Precision and recall of our MinHash-LSH dedup against brute force, on real mixed text.

Truth: every pair of documents whose word-5-gram Jaccard (character 5-grams for CJK/Thai) is
``>= 0.8``, computed exactly over all pairs with a sparse matrix product on Python sets of
shingle strings (independent of our hashing). Ours: exact-text pairs (all pairs within each
exact group) plus LSH candidates that pass verification, for each verification mode::

    .venv/bin/python bench/dedup_quality.py            # ~5k docs: news, CC, OSCAR, zh reviews

Ends with one JSON line.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dedup_corpus import available, load_corpus, write_documents  # noqa: E402
from pretrain.dedup.clusters import find_pairs, open_shards  # noqa: E402
from pretrain.dedup.config import DedupConfig  # noqa: E402
from pretrain.dedup.minhash import compute_signatures  # noqa: E402

THRESHOLD = 0.8
CJK = re.compile("[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def shingle_set(text: str, n: int = 5) -> set[str]:
    norm = " ".join(text.lower().split())
    letters = len(norm) - norm.count(" ")
    if letters and len(CJK.findall(norm)) >= 0.3 * letters:
        tokens = list(norm.replace(" ", ""))
    else:
        tokens = norm.split()
    if not tokens:
        return set()
    n = min(n, len(tokens))
    return {"\x1f".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


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


def our_pairs(sig_uri: str, config: DedupConfig, exact_groups: list[list[int]]) -> set:
    shards, _ = open_shards([sig_uri], config)
    _, near = find_pairs(shards, config)
    pairs = {tuple(p) for p in near.tolist()}
    for group in exact_groups:  # exact pairs are stars in our output: expand to all pairs
        pairs |= {(a, b) for i, a in enumerate(group) for b in group[i + 1 :]}
    return pairs


def main() -> None:
    if not available():
        raise SystemExit("../shared/data is not present: nothing to measure")
    docs = [d for d in load_corpus() if d["text"].strip()]  # empty texts have no Jaccard
    texts = [d["text"] for d in docs]
    started = time.perf_counter()
    truth = brute_force_pairs(texts)
    brute_s = time.perf_counter() - started
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        groups.setdefault(" ".join(t.lower().split()), []).append(i)
    exact_groups = [g for g in groups.values() if len(g) > 1]

    results = {"documents": len(docs), "true_pairs": len(truth), "brute_force_s": round(brute_s, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"{tmp}/docs/documents.parquet"
        write_documents(docs, uri)
        for verify in ("jaccard", "signature", "none"):
            config = DedupConfig(verify=verify)
            sig = f"{tmp}/sig/signatures.parquet"
            compute_signatures(uri, sig, config)
            started = time.perf_counter()
            ours = our_pairs(sig, config, exact_groups)
            hit = len(ours & truth)
            results[verify] = {
                "pairs": len(ours),
                "precision": round(hit / len(ours), 4) if ours else 1.0,
                "recall": round(hit / len(truth), 4) if truth else 1.0,
                "seconds": round(time.perf_counter() - started, 2),
            }
    by_source: dict[str, int] = {}
    for a, _ in truth:
        by_source[docs[a]["source"]] = by_source.get(docs[a]["source"], 0) + 1
    results["true_pairs_by_source"] = by_source
    print(f"documents {len(docs)}, true pairs (J >= {THRESHOLD}) {len(truth)}: {by_source}")
    print(f"{'verify':<10} {'pairs':>7} {'precision':>10} {'recall':>8} {'seconds':>8}")
    for verify in ("jaccard", "signature", "none"):
        r = results[verify]
        print(
            f"{verify:<10} {r['pairs']:>7} {r['precision']:>10} {r['recall']:>8} {r['seconds']:>8}"
        )
    print(json.dumps({"bench": "dedup_quality", **results}))


if __name__ == "__main__":
    main()
