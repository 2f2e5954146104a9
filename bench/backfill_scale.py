"""Data-stage backfills in process vs the local multiprocess executor vs a Ray cluster, and
``dedup_pairs`` fan-out at 1x and 10x the corpus.

Part 1: ``raw_shards`` → the two classifiers → ``filtered_shards`` for 8 shard groups of the
embedded corpus (real text already on this machine), each per-shard stage in runs of
``--partitions-per-run`` groups (a partition range: how a backfill of batches runs them,
``foundation/per_shard.py``; default 16, so one run), one run at a time, each way from empty
storage:

- ``in_process``: ``execute_in_process`` (no subprocess at all);
- ``multiprocess``: ``execute_job`` with the default multiprocess executor (each step a fresh
  Python process), the job from this module's factories;
- ``ray``: ``execute_job`` of ``app/ray_definitions.py``'s jobs: dagster-ray's
  ``ray_executor``, each step a Ray job, on a head and a worker node with 1 CPU each
  (``tests/servers/ray_cluster.py``).

Per-step overhead = (wall time - summed step compute time) / steps: what a step costs beyond its
own work (process start, imports, job submission, event writes); per group the same over the
shard groups.

Part 2: signatures of ``bench/dedup_scale.py``'s real corpus at 1x and 10x, then a sample of
``dedup_pairs`` band partitions, each in a fresh process (``max_partition_rows`` fixed:
sub-slices grow with the corpus, the peak RSS of one partition should not)::

    PYTHONPATH=$PWD .venv/bin/python bench/backfill_scale.py [--shards 8] [--partitions-per-run 16] [--copies 1 10] [--skip-ray]

Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAIRS = """
import json, sys, time
from pretrain.dedup.clusters import peak_rss_mb
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.pairs import band_pairs
uris, work, key, rows = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
floor = peak_rss_mb()
s = band_pairs(uris, work + "/clusters", f"{work}/pairs/{key}/pairs.parquet", key,
               DedupConfig(incremental=False, max_partition_rows=rows))
print(json.dumps({"key": key, "sub_slices": s.sub_slices, "bucket_rows": s.bucket_rows,
                  "peak_partition_rows": s.peak_partition_rows, "pairs": s.pairs,
                  "floor_rss_mb": floor, "peak_rss_mb": peak_rss_mb(), "seconds": s.seconds}))
"""
SAMPLE_KEYS = ("exact-s000", "url-s000", "b000-s000", "b007-s000", "b013-s000")


STAGES = ("raw_shards", "quality_classifier", "toxicity_classifier", "filtered_shards")
PER_SHARD = ("raw_shards", "filtered_shards")


@functools.cache
def local_definitions():
    """The project's Definitions (default multiprocess executor), root from PRETRAIN_ROOT."""
    from app.definitions import build_definitions

    return build_definitions()


# module-level job factories: execute_job(reconstructable(...)) rebuilds them in each step
def raw_shards_job():
    return local_definitions().resolve_job_def("raw_shards_job")


def quality_classifier_job():
    return local_definitions().resolve_job_def("quality_classifier_job")


def toxicity_classifier_job():
    return local_definitions().resolve_job_def("toxicity_classifier_job")


def filtered_shards_job():
    return local_definitions().resolve_job_def("filtered_shards_job")


def step_times(instance, run_id: str) -> list[float]:
    """Compute seconds of each step of a run (STEP_START → STEP_SUCCESS/FAILURE)."""
    starts, out = {}, []
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type_value == "STEP_START":
            starts[event.step_key] = entry.timestamp
        elif (
            event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in starts
        ):
            out.append(entry.timestamp - starts.pop(event.step_key))
    return out


def _batches(keys: list[str], per_run: int) -> list[dict[str, str]]:
    """The range tags of each run of a per-shard stage, ``per_run`` groups a run."""
    from foundation.partitions import RANGE_END, RANGE_START

    return [{RANGE_START: keys[i], RANGE_END: keys[min(i + per_run, len(keys)) - 1]}
            for i in range(0, len(keys), per_run)]  # fmt: skip


def _job(mode: str, stage: str):
    """The reconstructable job of ``stage`` for an ``execute_job`` mode."""
    from dagster import reconstructable

    if mode == "ray":
        import app.ray_definitions as factories

        factories.ray_definitions.cache_clear()  # built again with this mode's PRETRAIN_ROOT
        return reconstructable(getattr(factories, f"{stage}_on_ray"))
    local_definitions.cache_clear()
    return reconstructable(globals()[f"{stage}_job"])


def run_stages(mode: str, tmp: Path, shards: int, env: dict[str, str], per_run: int) -> dict:
    """Register the shards, run raw_shards → classifiers → filtered_shards; return timings."""
    from dagster import DagsterInstance, execute_job

    from app.definitions import build_definitions
    from foundation.shards import plan_source, register_shards
    from resources.storage import ArtifactStore

    root = tmp / mode / "artifacts"
    home = tmp / mode / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ.update({**env, "DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root)})
    manifests = plan_source("embedded", max_shards=shards)
    started = time.perf_counter()
    run_ids: list[str] = []
    stage_walls = {}
    with DagsterInstance.get() as instance:
        keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)
        defs = build_definitions(artifact_root=str(root))
        for stage in STAGES:
            stage_started = time.perf_counter()
            for tags in _batches(keys, per_run) if stage in PER_SHARD else [{}]:
                if mode == "in_process":
                    result = defs.resolve_job_def(f"{stage}_job").execute_in_process(
                        instance=instance, tags=tags, raise_on_error=False
                    )
                    success, run_id = result.success, result.run_id
                else:
                    with execute_job(_job(mode, stage), instance, tags=tags) as result:
                        success, run_id = result.success, result.run_id
                if not success:
                    raise SystemExit(f"{mode}: {stage} {tags} failed")
                run_ids.append(run_id)
            stage_walls[stage] = round(time.perf_counter() - stage_started, 1)
        wall = time.perf_counter() - started
        steps = [t for run_id in run_ids for t in step_times(instance, run_id)]
    overhead = wall - sum(steps)
    return {"wall_s": round(wall, 1), "runs": len(run_ids), "steps": len(steps),
            "groups": len(keys), "compute_s": round(sum(steps), 1),
            "per_step_overhead_s": round(overhead / len(steps), 2),
            "per_group_overhead_s": round(overhead / len(keys), 2),
            "stage_wall_s": stage_walls, "load_1m_after": round(os.getloadavg()[0], 2)}  # fmt: skip


def pairs_fan_out(tmp: Path, copies: int, max_rows: int) -> dict:
    from bench.dedup_corpus import load_corpus, scaled, write_documents
    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.minhash import compute_signatures

    docs = scaled(load_corpus(), copies, distinct=True)
    uris = []
    for i in range(0, len(docs), 5000):
        folder = tmp / f"x{copies}" / f"s{i // 5000:04d}"
        write_documents(docs[i : i + 5000], str(folder / "documents.parquet"))
        uris.append(str(folder / "sig" / "signatures.parquet"))
        compute_signatures(str(folder / "documents.parquet"), uris[-1], DedupConfig())
    env = {**os.environ, "POLARS_MAX_THREADS": "1", "PYTHONPATH": str(ROOT)}
    parts = []
    for key in SAMPLE_KEYS:
        run = subprocess.run(
            [sys.executable, "-c", PAIRS, json.dumps(uris), str(tmp / f"x{copies}"), key,
             str(max_rows)],
            capture_output=True, text=True, check=True, env=env, cwd=ROOT,
        )  # fmt: skip
        parts.append(json.loads(run.stdout.strip().splitlines()[-1]))
    return {"documents": len(docs), "partitions": parts,
            "max_peak_rss_mb": max(p["peak_rss_mb"] for p in parts),
            "max_peak_partition_rows": max(p["peak_partition_rows"] for p in parts)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--partitions-per-run", type=int, default=16)
    parser.add_argument("--copies", type=int, nargs="*", default=[1, 10])
    parser.add_argument("--max-partition-rows", type=int, default=5_000)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    from tests.servers.ray_cluster import node_env, ray_available, ray_cluster

    env = {"PYTHONPATH": str(ROOT), "POLARS_MAX_THREADS": "1"}
    per_run = args.partitions_per_run
    results: dict = {"load_average_start": [round(x, 2) for x in os.getloadavg()],
                     "partitions_per_run": per_run}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for mode in ("in_process", "multiprocess"):
            results[mode] = run_stages(mode, tmp, args.shards, env, per_run)
            print(mode, results[mode], flush=True)
        if not args.skip_ray and ray_available():
            started = time.perf_counter()
            with ray_cluster(tmp, head_cpus=1, worker_cpus=1) as cluster:
                up = round(time.perf_counter() - started, 1)
                ray_env = {**env, "RAY_ADDRESS": cluster.dashboard_url,
                           "PATH": node_env()["PATH"]}  # fmt: skip
                results["ray"] = {**run_stages("ray", tmp, args.shards, ray_env, per_run),
                                  "cluster_start_s": up}  # fmt: skip
                print("ray", results["ray"], flush=True)
        from bench.dedup_corpus import available

        for copies in args.copies if available() else []:
            results[f"pairs_x{copies}"] = pairs_fan_out(tmp, copies, args.max_partition_rows)
            print(f"pairs_x{copies}", {k: v for k, v in results[f"pairs_x{copies}"].items()
                                       if k != "partitions"}, flush=True)  # fmt: skip
    print(f"load average at start {results['load_average_start']}")
    print(f"{'mode':<14}{'wall s':>8}{'steps':>7}{'compute s':>11}{'overhead/step s':>17}"
          f"{'overhead/group s':>18}")  # fmt: skip
    for mode in ("in_process", "multiprocess", "ray"):
        if mode in results:
            r = results[mode]
            print(f"{mode:<14}{r['wall_s']:>8}{r['steps']:>7}{r['compute_s']:>11}"
                  f"{r['per_step_overhead_s']:>17}{r['per_group_overhead_s']:>18}")  # fmt: skip
    ratios = {}
    if "ray" in results:
        ratios["ray_vs_multiprocess_throughput"] = round(
            results["multiprocess"]["wall_s"] / results["ray"]["wall_s"], 3
        )
    ratios["multiprocess_vs_in_process_throughput"] = round(
        results["in_process"]["wall_s"] / results["multiprocess"]["wall_s"], 3
    )
    sizes = [k for k in results if k.startswith("pairs_x")]
    if len(sizes) > 1:
        ratios["pairs_rss_ratio"] = round(
            results[sizes[-1]]["max_peak_rss_mb"] / results[sizes[0]]["max_peak_rss_mb"], 3
        )
    load = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({"bench": "backfill_scale", **results, **ratios, "load_average_end": load}))


if __name__ == "__main__":
    main()
