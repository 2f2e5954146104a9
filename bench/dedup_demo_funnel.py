"""The demo corpus's dedup funnel under normalization v2 and v1, side by side.

Runs the library stages the demo runs before training — embedded corpus → ``raw_shards`` →
``filtered_shards`` (default filters) → ``minhash_signatures`` → ``dedup_clusters`` — once,
then signatures and clusters for each normalization, without Dagster::

    .venv/bin/python bench/dedup_demo_funnel.py [--shards 4] [--max-files-per-source N]

Prints the funnel (documents in, removed exact / URL / near, containment pairs listed) per
normalization and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pretrain.data.harvest import discover_embedded  # noqa: E402
from pretrain.data.raw import build_raw_shard, plan_shards  # noqa: E402
from pretrain.dedup.clusters import cluster_duplicates  # noqa: E402
from pretrain.dedup.config import DedupConfig, LineDedupConfig  # noqa: E402
from pretrain.dedup.minhash import compute_signatures  # noqa: E402
from pretrain.filters.config import FilterConfig  # noqa: E402
from pretrain.filters.pipeline import filter_shard  # noqa: E402

KEYS = ("documents", "removed", "removed_exact", "removed_url", "removed_near",
        "containment_pairs", "verified_pairs", "boilerplate_units", "seconds")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--max-files-per-source", type=int, default=None)
    args = parser.parse_args()
    files = discover_embedded(max_files_per_source=args.max_files_per_source)
    manifests = plan_shards(files, files_per_shard=None, max_shards=args.shards, prefix="demo")
    results: dict = {"shards": len(manifests)}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        filtered = []
        for manifest in manifests:
            raw = f"{tmp}/raw/{manifest.key}"
            build_raw_shard(manifest, raw)
            out = f"{tmp}/filtered/{manifest.key}"
            filter_shard(f"{raw}/documents.parquet", out, FilterConfig())
            filtered.append(f"{out}/documents.parquet")
        results["prepare_s"] = round(time.perf_counter() - started, 1)
        for normalization in ("v2", "v1"):
            # the demo's dedup settings (the DedupConfig defaults): line dedup at 20 documents
            config = DedupConfig(
                normalization=normalization, lines=LineDedupConfig(min_documents=20)
            )
            sigs = []
            for uri in filtered:
                sig = uri.replace("/filtered/", f"/sig-{normalization}/").replace(
                    "documents.parquet", "signatures.parquet"
                )
                compute_signatures(uri, sig, config)
                sigs.append(sig)
            stats = cluster_duplicates(sigs, f"{tmp}/clusters-{normalization}", config)
            meta = stats.as_metadata()
            results[normalization] = {k: meta[k] for k in KEYS}
            print(normalization, results[normalization], flush=True)
    print(json.dumps({"bench": "dedup_demo_funnel", **results}))


if __name__ == "__main__":
    main()
