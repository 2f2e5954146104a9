"""Clustering memory grows with one band partition, not with the corpus.

Builds the mixed real corpus at 1x, 4x and 10x (copy k shuffles each text's words with seed k:
new documents, same length and script mix, about the same duplicate rate), computes
signatures, then runs the clustering stage in a fresh process for each size with
``max_partition_rows`` fixed: the number of hash slices grows with the corpus, the rows held
per band partition and the process peak RSS stay about the same::

    .venv/bin/python bench/dedup_scale.py [--max-partition-rows 5000] [--copies 1 4 10]

Peak RSS is the child's own ``VmHWM`` (``/proc/self/status``), not ``ru_maxrss``: on Linux
that one keeps the high-water mark of the parent image the child was forked from, so every
size would report this script's own peak (it holds the whole corpus). ``floor_rss_mb`` is
the child after its imports, before clustering.

Ends with one JSON line. Path to billions: see bench/RESULTS.md (dedup section).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CLUSTER = """
import json, sys, time
from pretrain.dedup.clusters import cluster_duplicates, peak_rss_mb
from pretrain.dedup.config import DedupConfig
uris, out, rows = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
floor = peak_rss_mb()
t0 = time.perf_counter()
s = cluster_duplicates(uris, out, DedupConfig(incremental=False, max_partition_rows=rows))
print(json.dumps({"documents": s.documents, "partitions": s.partitions,
                  "peak_partition_rows": s.peak_partition_rows, "removed": s.removed,
                  "candidate_pairs": s.candidate_pairs, "verified_pairs": s.verified_pairs,
                  "floor_rss_mb": floor, "peak_rss_mb": peak_rss_mb(),
                  "seconds": round(time.perf_counter() - t0, 2)}))
"""


def main() -> None:
    from bench.dedup_corpus import available, load_corpus, scaled, write_documents
    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.minhash import compute_signatures

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-partition-rows", type=int, default=5_000)
    parser.add_argument("--shard-docs", type=int, default=5_000)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 4, 10])
    args = parser.parse_args()
    if not available():
        raise SystemExit("../shared/data is not present: nothing to measure")
    base = load_corpus()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for copies in args.copies:
            docs = scaled(base, copies, distinct=True)
            uris = []
            for i in range(0, len(docs), args.shard_docs):
                folder = f"{tmp}/x{copies}/s{i // args.shard_docs:04d}"
                write_documents(docs[i : i + args.shard_docs], f"{folder}/documents.parquet")
                sig = f"{folder}/sig/signatures.parquet"
                compute_signatures(f"{folder}/documents.parquet", sig, DedupConfig())
                uris.append(sig)
            env = {**os.environ, "POLARS_MAX_THREADS": "1"}
            run = subprocess.run(
                [sys.executable, "-c", CLUSTER, json.dumps(uris), f"{tmp}/x{copies}/clusters",
                 str(args.max_partition_rows)],
                capture_output=True, text=True, check=True, env=env, cwd=ROOT,
            )  # fmt: skip
            results[f"x{copies}"] = {**json.loads(run.stdout.strip().splitlines()[-1]),
                                     "shards": len(uris)}  # fmt: skip
    print(f"{'corpus':<8}{'documents':>10}{'shards':>8}{'partitions':>12}{'peak rows':>11}"
          f"{'floor MB':>10}{'peak RSS MB':>13}{'removed':>9}{'seconds':>9}")  # fmt: skip
    for name, r in results.items():
        print(f"{name:<8}{r['documents']:>10,}{r['shards']:>8}{r['partitions']:>12}"
              f"{r['peak_partition_rows']:>11,}{r['floor_rss_mb']:>10.0f}{r['peak_rss_mb']:>13.0f}"
              f"{r['removed']:>9,}{r['seconds']:>9.1f}")  # fmt: skip
    smallest = f"x{min(args.copies)}"
    ratios = {k: round(r["peak_rss_mb"] / results[smallest]["peak_rss_mb"], 3)
              for k, r in results.items()}  # fmt: skip
    print(json.dumps({"bench": "dedup_scale", **results, f"rss_ratio_vs_{smallest}": ratios}))


if __name__ == "__main__":
    main()
