"""Band-partitioned dedup gives the same ``clusters.parquet`` bytes as another checkout's
single-op clustering (e.g. main before ``dedup_pairs`` existed).

Two corpora: the demo's (embedded corpus, 4 shard groups, materialized through Dagster:
``raw_shards`` → the classifiers → ``filtered_shards`` → ``minhash_signatures`` →
``dedup_pairs`` per band partition → ``dedup_clusters``) and ``bench/dedup_scale.py``'s mixed real corpus at 1x and 10x (signatures in
this process, then the band partitions with ``hash_slices`` > 1 and small
``max_partition_rows``, so sub-slices are exercised too). The baseline runs
``cluster_duplicates`` from ``--baseline`` in a subprocess on the same signature files::

    git -C /work/main archive HEAD pretrain | tar -x -C /tmp/base
    .venv/bin/python bench/dedup_band_identity.py --baseline /tmp/base [--copies 1 10] [--no-demo]

Ends with one JSON line: per corpus, documents, removed and whether the bytes match.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASELINE = """
import json, sys
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig, LineDedupConfig
uris, out, kw = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
lines = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.pop("lines", {}).items()}
lines = LineDedupConfig(**lines)
s = cluster_duplicates(uris, out, DedupConfig(**kw, lines=lines))
print(json.dumps({"documents": s.documents, "removed": s.removed}))
"""


def baseline(root: str, uris: list[str], out: str, config: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": root, "POLARS_MAX_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-c", BASELINE, json.dumps(uris), out, json.dumps(config)],
        capture_output=True, text=True, check=True, env=env, cwd=root,
    )  # fmt: skip
    return json.loads(run.stdout.strip().splitlines()[-1])


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def band_path(uris: list[str], work: str, config_kwargs: dict) -> dict:
    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.pairs import band_pairs, band_partition_keys, cluster_band_pairs, pairs_uri

    config = DedupConfig(**config_kwargs)
    started = time.perf_counter()
    for key in band_partition_keys(config):
        band_pairs(uris, f"{work}/clusters", pairs_uri(f"{work}/pairs", key), key, config)
    stats = cluster_band_pairs(uris, f"{work}/pairs", f"{work}/clusters", config)
    return {"removed": stats.removed, "partitions": len(band_partition_keys(config)),
            "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip


def scaled_corpus(base_root: str, tmp: str, copies: int) -> dict:
    from bench.dedup_corpus import load_corpus, scaled, write_documents
    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.minhash import compute_signatures

    docs = scaled(load_corpus(), copies, distinct=True)
    uris = []
    for i in range(0, len(docs), 5000):
        folder = f"{tmp}/x{copies}/s{i // 5000:04d}"
        write_documents(docs[i : i + 5000], f"{folder}/documents.parquet")
        uris.append(f"{folder}/sig/signatures.parquet")
        compute_signatures(f"{folder}/documents.parquet", uris[-1], DedupConfig())
    settings = {"incremental": False, "max_partition_rows": 5000}
    base = baseline(base_root, uris, f"{tmp}/x{copies}/base", settings)
    ours = band_path(uris, f"{tmp}/x{copies}/band", {**settings, "hash_slices": 3})
    a, b = (
        f"{tmp}/x{copies}/base/clusters.parquet",
        f"{tmp}/x{copies}/band/clusters/clusters.parquet",
    )
    return {**base, **ours, "shards": len(uris), "identical": digest(a) == digest(b),
            "sha256": digest(b)}  # fmt: skip


def demo_corpus(base_root: str, tmp: str) -> dict:
    from dagster import DagsterInstance

    from app.definitions import build_definitions
    from foundation.shards import plan_source, register_shards
    from pretrain.dedup.config import DedupConfig
    from resources.storage import ArtifactStore
    from tests.helpers.pipelines import materialize_dedup, materialize_signatures

    root = f"{tmp}/demo"
    defs = build_definitions(artifact_root=root)
    with DagsterInstance.ephemeral() as instance:
        keys = register_shards(instance, ArtifactStore(root=root), plan_source("embedded"))
        materialize_signatures(defs, instance, keys)
        started = time.perf_counter()
        materialize_dedup(defs, instance)
        seconds = round(time.perf_counter() - started, 1)
    uris = [f"{root}/minhash_signatures/{k}/signatures.parquet" for k in keys]
    # the asset's defaults are the library's (line dedup at 20 documents, incremental on)
    settings = dataclasses.asdict(DedupConfig())
    settings.pop("hash_slices")
    base = baseline(base_root, uris, f"{tmp}/demo-base", settings)
    a, b = f"{tmp}/demo-base/clusters.parquet", f"{root}/dedup_clusters/clusters.parquet"
    return {**base, "shards": len(keys), "dagster_dedup_seconds": seconds,
            "identical": digest(a) == digest(b), "sha256": digest(b)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a checkout whose pretrain/ to compare")
    parser.add_argument("--copies", type=int, nargs="*", default=[1, 10])
    parser.add_argument("--no-demo", action="store_true")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_demo:
            results["demo"] = demo_corpus(args.baseline, tmp)
            print("demo", results["demo"], flush=True)
        from bench.dedup_corpus import available

        for copies in args.copies if available() else []:
            results[f"x{copies}"] = scaled_corpus(args.baseline, tmp, copies)
            print(f"x{copies}", results[f"x{copies}"], flush=True)
    print(json.dumps({"bench": "dedup_band_identity", **results}))


if __name__ == "__main__":
    main()
