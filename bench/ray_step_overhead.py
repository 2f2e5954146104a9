"""Where a data step's time goes on the Ray cluster: one run at a time, phase by phase.

Starts a head + worker (1 CPU each, ``tests/servers/ray_cluster.py``), registers ``--shards`` shard
partitions of the embedded corpus and runs ``raw_shards`` then ``filtered_shards`` for each,
one run at a time (so no phase hides behind another run's), with each executor given by
``--modes`` (``--batched``: each per-shard stage one run over every group, as a backfill of
batches runs it):

- ``jobs``: dagster-ray's ``ray_executor``, each step a Ray job (``*_on_ray_jobs``);
- ``actors``: our actor-pool executor, each step a call on a warm actor (``*_on_ray``).

Per run and per step it reads the Dagster event log (and, for ``jobs``, the Ray job table):

- ``first_run_start``: a stage's first RUN_START after it was asked for (the first stage: the
  partition-run server's start, imports and job build; later stages: the job's build and a
  fork) — per run after that, ``between_runs``: the previous run's RUN_SUCCESS → the next
  RUN_START (teardown, fork, run creation, the executor's connection to the cluster);
- ``launch``: the orchestrator's STEP_WORKER_STARTING → the step process's STEP_WORKER_STARTED
  (``jobs``: job submission, supervisor actor, ``/bin/sh``, a fresh Python importing Dagster
  and the CLI; ``actors``: the call reaching a warm actor);
- ``load``: STEP_WORKER_STARTED → STEP_START (the job definition and its plan in the step's
  process, resource init);
- ``compute``: STEP_START → STEP_SUCCESS (the asset body and its events);
- ``pickup``: STEP_SUCCESS → the orchestrator's next launch or RUN_SUCCESS (event-log polling);
- ``stage_tail``: a stage's last RUN_SUCCESS → its outcomes back in this process.

``overhead_per_step_s`` = (wall time − summed step compute) / steps, as in
``bench/backfill_scale.py`` at concurrency 1.

Plus three probes on the same machine: a cold ``import dagster``, a cold import of
``app.ray_definitions`` with its definitions built, a no-op Ray job (``true``) submit → SUCCEEDED,
and the mean cost of one event write to the SQLite instance::

    PYTHONPATH=$PWD .venv/bin/python bench/ray_step_overhead.py [--shards 3] [--modes jobs actors]

Ends with one JSON line (seconds; means over runs/steps; the load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SUFFIX = {"jobs": "_on_ray_jobs", "actors": "_on_ray"}


def _cold(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)
    return round(time.perf_counter() - started, 2)


def _noop_job(dashboard_url: str) -> float:
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(dashboard_url)
    started = time.perf_counter()
    job = client.submit_job(entrypoint="true", entrypoint_num_cpus=1)
    while client.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        time.sleep(0.05)
    return round(time.perf_counter() - started, 2)


def _event_write_s(instance, run_id: str, count: int = 20) -> float:
    from dagster import DagsterInstance

    assert isinstance(instance, DagsterInstance)
    run = instance.get_run_by_id(run_id)
    started = time.perf_counter()
    for i in range(count):
        instance.report_engine_event(f"probe {i}", run)
    return round((time.perf_counter() - started) / count, 4)


def _marks(instance, run_id: str) -> list[tuple[float, str, str | None]]:
    return [(e.timestamp, e.dagster_event.event_type_value, e.step_key)
            for e in instance.all_logs(run_id) if e.dagster_event is not None]  # fmt: skip


def _step_phases(marks: list[tuple[float, str, str | None]]) -> list[dict]:
    """Per-step phase durations (see module docstring) from one run's event marks."""
    steps: dict[str, dict[str, float]] = {}
    for t, kind, key in marks:
        if key is not None:
            steps.setdefault(key, {}).setdefault(kind, t)
    out = []
    for key, at in steps.items():
        done = at.get("STEP_SUCCESS", at.get("STEP_FAILURE"))
        after = [t for t, kind, _ in marks
                 if t > done and kind in ("STEP_WORKER_STARTING", "PIPELINE_SUCCESS")]  # fmt: skip
        out.append({
            "step": key,
            "launch": at["STEP_WORKER_STARTED"] - at["STEP_WORKER_STARTING"],
            "load": at["STEP_START"] - at["STEP_WORKER_STARTED"],
            "compute": done - at["STEP_START"],
            "pickup": min(after) - done,
        })  # fmt: skip
    return out


def measure(mode: str, tmp: Path, shards: int) -> dict:
    """One stage after another, one run at a time; phases per step and between runs."""
    from dagster import DagsterInstance

    from executors.partition_runs import PartitionRunner
    from foundation.shards import plan_source, register_shards
    from resources.storage import ArtifactStore

    root, home = tmp / mode / "artifacts", tmp / mode / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ.update({"DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root)})
    with DagsterInstance.get() as instance:
        keys = register_shards(
            instance, ArtifactStore(root=str(root)), plan_source("embedded", max_shards=shards)
        )
    steps, first_starts, run_gaps, tails, run_ids, wall = [], [], [], [], [], 0.0
    runner = PartitionRunner()
    stages = (("raw_shards", keys), ("quality_classifier", [None]), ("filtered_shards", keys))
    for stage, partitions in stages:
        started = time.time()
        outcomes = runner.run(f"app.ray_definitions:{stage}{SUFFIX[mode]}", partitions, width=1)
        ended = time.time()
        wall += ended - started
        failed = {k: o["failures"] for k, o in outcomes.items() if not o["success"]}
        if failed:
            raise SystemExit(f"{mode}: {stage} failed: {failed}")
        with DagsterInstance.get() as instance:
            runs = [_marks(instance, outcomes[k]["run_id"]) for k in partitions]
        runs.sort(key=lambda m: m[0][0])
        previous_end = started
        for index, marks in enumerate(runs):
            at = {kind: t for t, kind, _ in reversed(marks)}
            gap = at["PIPELINE_START"] - previous_end
            (first_starts if index == 0 else run_gaps).append(gap)
            previous_end = at["PIPELINE_SUCCESS"]
            steps += _step_phases(marks)
        tails.append(ended - previous_end)
        run_ids += [outcomes[k]["run_id"] for k in partitions]
    started = time.time()
    runner.close()
    wall += time.time() - started
    with DagsterInstance.get() as instance:
        write_s = _event_write_s(instance, run_ids[0])
        events = sum(1 for r in run_ids for _ in instance.all_logs(r))
    mean = {k: round(statistics.mean(s[k] for s in steps), 2)
            for k in ("launch", "load", "compute", "pickup")}  # fmt: skip
    compute = sum(s["compute"] for s in steps)
    return {"runs": len(run_ids), "steps": len(steps), "wall_s": round(wall, 1),
            "step_mean_s": mean,
            # first run of a stage: a fresh process (old runner) or the server's start + fork
            "first_run_start_s": round(statistics.mean(first_starts), 2),
            # previous run's end → next RUN_START: teardown, process start or fork, run setup
            "between_runs_s": round(statistics.mean(run_gaps), 2) if run_gaps else None,
            "stage_tail_s": round(statistics.mean(tails), 2),
            "events_per_step": round(events / len(steps), 1), "event_write_s": write_s,
            "overhead_per_step_s": round((wall - compute) / len(steps), 2)}  # fmt: skip


def measure_batched(mode: str, tmp: Path, shards: int) -> dict:
    """The per-shard stages as backfills of batches run them: one run over every shard group
    per stage (a partition range), then the classifiers; per step and per group."""
    from dagster import DagsterInstance, execute_job, reconstructable

    import app.ray_definitions as factories
    from foundation.partitions import RANGE_END, RANGE_START
    from foundation.shards import plan_source, register_shards
    from resources.storage import ArtifactStore

    root, home = tmp / f"{mode}-batched" / "artifacts", tmp / f"{mode}-batched" / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ.update({"DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root)})
    with DagsterInstance.get() as instance:
        keys = register_shards(
            instance, ArtifactStore(root=str(root)), plan_source("embedded", max_shards=shards)
        )
        batch = {RANGE_START: keys[0], RANGE_END: keys[-1]}
        stages = (("raw_shards", batch), ("quality_classifier", {}), ("toxicity_classifier", {}),
                  ("filtered_shards", batch), ("minhash_signatures", batch))  # fmt: skip
        steps, wall = [], 0.0
        for stage, tags in stages:
            job = reconstructable(getattr(factories, f"{stage}{SUFFIX[mode]}"))
            started = time.time()
            with execute_job(job, instance, tags=tags) as result:
                if not result.success:
                    raise SystemExit(f"{mode}: {stage} failed")
                run_id = result.run_id
            wall += time.time() - started
            steps += _step_phases(_marks(instance, run_id))
    compute = sum(s["compute"] for s in steps)
    mean = {k: round(statistics.mean(s[k] for s in steps), 2)
            for k in ("launch", "load", "compute", "pickup")}  # fmt: skip
    return {"runs": len(stages), "steps": len(steps), "groups": len(keys), "wall_s": round(wall, 1),
            "step_mean_s": mean, "overhead_per_step_s": round((wall - compute) / len(steps), 2),
            "overhead_per_group_s": round((wall - compute) / len(keys), 2)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["jobs", "actors"], choices=list(SUFFIX))
    parser.add_argument("--batched", action="store_true",
                        help="each per-shard stage one run over every group, as backfills run")  # fmt: skip
    args = parser.parse_args()
    from executors.ray_pool import stop_step_pool
    from tests.servers.ray_cluster import node_env, ray_cluster

    load_before = os.getloadavg()
    probes = {
        "import_dagster_s": _cold("import dagster"),
        "import_definitions_s": _cold("import app.ray_definitions as r; r.ray_definitions()"),
    }
    results: dict = {"bench": "ray_step_overhead", "probes": probes}
    with tempfile.TemporaryDirectory() as tmp_name, ray_cluster(Path(tmp_name)) as cluster:
        os.environ.update({"RAY_JOBS_ADDRESS": cluster.dashboard_url,
                           "RAY_ADDRESS": cluster.address, "PYTHONPATH": str(ROOT),
                           "POLARS_MAX_THREADS": "1", "PATH": node_env()["PATH"]})  # fmt: skip
        probes["noop_ray_job_s"] = _noop_job(cluster.dashboard_url)
        for mode in args.modes:
            run = measure_batched if args.batched else measure
            results[mode] = run(mode, Path(tmp_name), args.shards)
            print(mode, results[mode], flush=True)
            stop_step_pool(cluster.address)  # idle workers hold CPUs a Ray job would wait for
    results["load_average"] = {"before": [round(x, 2) for x in load_before],
                               "after": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
