"""Clustering memory grows with one band partition, not with the corpus.

Builds the mixed real corpus at 1x and 10x (copy k shuffles each text's words with seed k:
new documents, same length and script mix, about the same duplicate rate), computes signatures, then runs the clustering stage in a fresh
process for each size with ``max_partition_rows`` fixed: the number of hash slices grows
10x, the rows held per band partition and the process peak RSS stay about the same::

    .venv/bin/python bench/dedup_scale.py [--max-partition-rows 5000]

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
import json, resource, sys, time
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig
uris, out, rows = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
s = cluster_duplicates(uris, out, DedupConfig(incremental=False, max_partition_rows=rows))
print(json.dumps({"documents": s.documents, "partitions": s.partitions,
                  "peak_partition_rows": s.peak_partition_rows, "removed": s.removed,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - t0}))
"""


def main() -> None:
    from bench.dedup_corpus import available, load_corpus, scaled, write_documents
    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.minhash import compute_signatures

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-partition-rows", type=int, default=5_000)
    parser.add_argument("--shard-docs", type=int, default=5_000)
    args = parser.parse_args()
    if not available():
        raise SystemExit("../shared/data is not present: nothing to measure")
    base = load_corpus()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for copies in (1, 10):
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
          f"{'peak RSS MB':>13}{'removed':>9}{'seconds':>9}")  # fmt: skip
    for name, r in results.items():
        print(f"{name:<8}{r['documents']:>10,}{r['shards']:>8}{r['partitions']:>12}"
              f"{r['peak_partition_rows']:>11,}{r['peak_rss_mb']:>13.0f}{r['removed']:>9,}"
              f"{r['seconds']:>9.1f}")  # fmt: skip
    ratio = results["x10"]["peak_rss_mb"] / results["x1"]["peak_rss_mb"]
    print(json.dumps({"bench": "dedup_scale", **results, "rss_ratio_10x_vs_1x": round(ratio, 3)}))


if __name__ == "__main__":
    main()
