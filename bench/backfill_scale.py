"""Data-stage backfills in process vs the local multiprocess executor vs a Ray cluster, and
``dedup_pairs`` fan-out at 1x and 10x the corpus.

Part 1: ``ingest`` → ``quality`` → ``shard_pipeline`` for 8 shard partitions of the embedded
corpus (real text already on this machine), three ways, each from empty storage:

- ``in_process``: one run per partition, ``execute_in_process`` (no subprocess at all);
- ``multiprocess``: one run per partition through ``execute_job`` with the default
  multiprocess executor (each step a fresh Python process), 2 runs at a time, each run in a
  process of its own (``executors/partition_runs.py``: forked from one server per mode);
- ``ray``: the same runs with ``app/ray_definitions.py``'s default executor (each step on a warm
  Ray actor of the cluster's step pool, ``executors/ray_executor.py``) on a head and a worker node
  with 1 CPU each (``tests/servers/ray_cluster.py``), 2 runs at a time;
- ``ray_jobs``: the same with dagster-ray's ``ray_executor`` (each step a Ray job), on the
  same cluster right after.

Per-step overhead = (wall time x concurrency - summed step compute time) / steps: what a
step costs beyond its own work (process start, imports, job submission, event writes).

Part 2: signatures of ``bench/dedup_scale.py``'s real corpus at 1x and 10x, then a sample of
``dedup_pairs`` band partitions, each in a fresh process (``max_partition_rows`` fixed:
sub-slices grow with the corpus, the peak RSS of one partition should not)::

    .venv/bin/python bench/backfill_scale.py [--shards 8] [--copies 1 10] [--skip-ray]

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


@functools.cache
def local_definitions():
    """The project's Definitions (default multiprocess executor), root from PRETRAIN_ROOT."""
    from app.definitions import build_definitions

    return build_definitions()


# module-level job factories: execute_job(reconstructable(...)) rebuilds them in each step
def ingest_job():
    return local_definitions().resolve_job_def("raw_shards_job")


def quality_job():
    return local_definitions().resolve_job_def("quality")


def shard_pipeline_job():
    return local_definitions().resolve_job_def("shard_pipeline")


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


def run_stages(mode: str, tmp: Path, shards: int, env: dict[str, str], concurrency: int) -> dict:
    """Register the shards, run ingest → quality → shard_pipeline; return timings."""
    from dagster import DagsterInstance

    from app.definitions import build_definitions
    from executors.partition_runs import PartitionRunner
    from foundation.shards import plan_source, register_shards
    from resources.storage import ArtifactStore

    root = tmp / mode / "artifacts"
    home = tmp / mode / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ.update({**env, "DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root)})
    factories = {  # module:prefix → job factory name = stage + suffix
        "multiprocess": ("bench.backfill_scale", "_job"),  # this module's (default executor)
        "ray": ("app.ray_definitions", "_on_ray"),
        "ray_jobs": ("app.ray_definitions", "_on_ray_jobs"),
    }
    stages = ("raw_shards", "quality", "shard_pipeline")
    manifests = plan_source("embedded", max_shards=shards)
    started = time.perf_counter()
    with DagsterInstance.get() as instance:
        keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)
    run_ids: list[str] = []
    width = 1 if mode == "in_process" else concurrency
    runner = None if mode == "in_process" else PartitionRunner()  # one server for the stages
    stage_walls = {}
    for stage, partitions in zip(stages, (keys, [None], keys), strict=True):
        stage_started = time.perf_counter()
        if mode == "in_process":
            job = build_definitions(artifact_root=str(root)).resolve_job_def(stage)
            with DagsterInstance.get() as instance:
                for partition in partitions:
                    result = job.execute_in_process(instance=instance, partition_key=partition)
                    if not result.success:
                        raise SystemExit(f"{mode}: {stage} {partition} failed")
                    run_ids.append(result.run_id)
            stage_walls[stage] = round(time.perf_counter() - stage_started, 1)
            continue
        module, suffix = factories[mode]
        assert runner is not None
        outcomes = runner.run(f"{module}:{stage}{suffix}", partitions, width=width)
        failed = {k: r["failures"] for k, r in outcomes.items() if not r["success"]}
        if failed:
            raise SystemExit(f"{mode}: {stage} failed: {failed}")
        run_ids += [r["run_id"] for r in outcomes.values()]
        stage_walls[stage] = round(time.perf_counter() - stage_started, 1)
    if runner is not None:
        runner.close()
    wall = time.perf_counter() - started
    with DagsterInstance.get() as instance:
        steps = [t for run_id in run_ids for t in step_times(instance, run_id)]
    overhead = (wall * width - sum(steps)) / len(steps)
    return {"wall_s": round(wall, 1), "steps": len(steps), "compute_s": round(sum(steps), 1),
            "per_step_overhead_s": round(overhead, 2), "concurrency": width,
            # a one-run stage (quality) leaves width - 1 slots idle: counted in the overhead
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
    parser.add_argument("--copies", type=int, nargs="*", default=[1, 10])
    parser.add_argument("--max-partition-rows", type=int, default=5_000)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    from executors.ray_pool import stop_step_pool
    from tests.servers.ray_cluster import node_env, ray_available, ray_cluster

    env = {"PYTHONPATH": str(ROOT), "POLARS_MAX_THREADS": "1"}
    results: dict = {"load_average_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for mode in ("in_process", "multiprocess"):
            results[mode] = run_stages(mode, tmp, args.shards, env, concurrency=2)
            print(mode, results[mode], flush=True)
        if not args.skip_ray and ray_available():
            started = time.perf_counter()
            with ray_cluster(tmp, head_cpus=1, worker_cpus=1) as cluster:
                up = round(time.perf_counter() - started, 1)
                ray_env = {**env, "RAY_JOBS_ADDRESS": cluster.dashboard_url,
                           "RAY_ADDRESS": cluster.address, "PATH": node_env()["PATH"]}  # fmt: skip
                for mode in ("ray", "ray_jobs"):
                    results[mode] = {**run_stages(mode, tmp, args.shards, ray_env, 2),
                                     "cluster_start_s": up}  # fmt: skip
                    print(mode, results[mode], flush=True)
                    # idle step workers hold their CPUs: Ray jobs asking for 1 CPU would wait
                    stop_step_pool(cluster.address)
        from bench.dedup_corpus import available

        for copies in args.copies if available() else []:
            results[f"pairs_x{copies}"] = pairs_fan_out(tmp, copies, args.max_partition_rows)
            print(f"pairs_x{copies}", {k: v for k, v in results[f"pairs_x{copies}"].items()
                                       if k != "partitions"}, flush=True)  # fmt: skip
    print(f"load average at start {results['load_average_start']}")
    print(f"{'mode':<14}{'wall s':>8}{'steps':>7}{'compute s':>11}{'overhead/step s':>17}")
    for mode in ("in_process", "multiprocess", "ray", "ray_jobs"):
        if mode in results:
            r = results[mode]
            print(f"{mode:<14}{r['wall_s']:>8}{r['steps']:>7}{r['compute_s']:>11}"
                  f"{r['per_step_overhead_s']:>17}")  # fmt: skip
    ratios = {}
    if "ray" in results:
        for mode in ("ray", "ray_jobs"):
            ratios[f"{mode}_vs_multiprocess_throughput"] = round(
                results["multiprocess"]["wall_s"] / results[mode]["wall_s"], 3
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
