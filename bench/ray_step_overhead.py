"""Where a data step's time goes on a Ray cluster (dagster-ray's executor), phase by phase.

Starts a head + worker (1 CPU each, ``tests/servers/ray_cluster.py``), registers ``--shards``
shard partitions of the embedded corpus and runs ``raw_shards``, the classifiers and
``filtered_shards`` through ``app/ray_definitions.py`` (dagster-ray's ``ray_executor``: each step
a Ray job), one run at a time in this process (``execute_job``), so no phase hides behind
another run's: one run per shard group, or with ``--batched`` each per-shard stage as one run
over every group (a partition range, as a backfill of batches runs it; then
``minhash_signatures`` too).

Per run and per step it reads the Dagster event log:

- ``first_run_start``: a stage's first RUN_START after it was asked for (the job reconstructed
  in this process, the run created) — per run after that, ``between_runs``: the previous run's
  RUN_SUCCESS → the next RUN_START (teardown, run creation, the executor's job client);
- ``launch``: the orchestrator's STEP_WORKER_STARTING → the step process's STEP_WORKER_STARTED
  (job submission, the job's supervisor actor, ``/bin/sh``, a fresh Python importing Dagster
  and the CLI);
- ``load``: STEP_WORKER_STARTED → STEP_START (our definitions and the job's plan in the step's
  process, resource init);
- ``compute``: STEP_START → STEP_SUCCESS (the asset body and its events);
- ``pickup``: STEP_SUCCESS → the orchestrator's next launch or RUN_SUCCESS (event-log polling);
- ``stage_tail``: a stage's last RUN_SUCCESS → ``execute_job`` back in this process.

``overhead_per_step_s`` = (wall time − summed step compute) / steps, as in
``bench/backfill_scale.py`` at concurrency 1 (``--batched``: also per group).

Plus probes on the same machine: a cold ``import dagster``, a cold import of
``app.ray_definitions`` (its definitions built), a no-op Ray job (``true``) submit → SUCCEEDED,
and the mean cost of one event write to the SQLite instance::

    PYTHONPATH=$PWD .venv/bin/python bench/ray_step_overhead.py [--shards 3] [--batched]

Ends with one JSON line (seconds; means over runs/steps; the load average before and after);
the measurements are under ``jobs`` (dagster-ray's Ray-job-per-step executor).
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

MODE = "jobs"  # the key of the results: each step a Ray job (dagster-ray)


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


def _prepare(tmp: Path, shards: int) -> list[str]:
    """A fresh instance and artifact root under ``tmp`` with ``shards`` groups registered."""
    from dagster import DagsterInstance

    import app.ray_definitions as factories
    from foundation.shards import plan_source, register_shards
    from resources.storage import ArtifactStore

    root, home = tmp / "artifacts", tmp / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ.update({"DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root)})
    factories.ray_definitions.cache_clear()  # built again with this PRETRAIN_ROOT
    with DagsterInstance.get() as instance:
        return register_shards(
            instance, ArtifactStore(root=str(root)), plan_source("embedded", max_shards=shards)
        )


def _run(instance, stage: str, tags: dict[str, str]) -> str:
    """One run of ``stage``'s job on Ray; its run id (exits on a failure)."""
    from dagster import execute_job, reconstructable

    import app.ray_definitions as factories

    job = reconstructable(getattr(factories, f"{stage}_on_ray"))
    with execute_job(job, instance, tags=tags) as result:
        if not result.success:
            raise SystemExit(f"{MODE}: {stage} {tags} failed")
        return result.run_id


def measure(tmp: Path, shards: int) -> dict:
    """One run per shard group (and one per classifier), one run at a time; phases per step
    and between runs."""
    from dagster import DagsterInstance

    keys = _prepare(tmp / MODE, shards)
    steps, first_starts, run_gaps, tails, run_ids, wall = [], [], [], [], [], 0.0
    one = [{"dagster/partition": k} for k in keys]
    stages = (("raw_shards", one), ("quality_classifier", [{}]), ("toxicity_classifier", [{}]),
              ("filtered_shards", one))  # fmt: skip
    with DagsterInstance.get() as instance:
        for stage, runs in stages:
            started = time.time()
            stage_ids = [_run(instance, stage, tags) for tags in runs]
            ended = time.time()
            wall += ended - started
            previous_end = started
            for index, run_id in enumerate(stage_ids):
                marks = _marks(instance, run_id)
                at = {kind: t for t, kind, _ in reversed(marks)}
                gap = at["PIPELINE_START"] - previous_end
                (first_starts if index == 0 else run_gaps).append(gap)
                previous_end = at["PIPELINE_SUCCESS"]
                steps += _step_phases(marks)
            tails.append(ended - previous_end)
            run_ids += stage_ids
        write_s = _event_write_s(instance, run_ids[0])
        events = sum(1 for r in run_ids for _ in instance.all_logs(r))
    mean = {k: round(statistics.mean(s[k] for s in steps), 2)
            for k in ("launch", "load", "compute", "pickup")}  # fmt: skip
    compute = sum(s["compute"] for s in steps)
    return {"runs": len(run_ids), "steps": len(steps), "wall_s": round(wall, 1),
            "step_mean_s": mean,
            # first run of a stage: the job reconstructed here, the run created
            "first_run_start_s": round(statistics.mean(first_starts), 2),
            # previous run's end → next RUN_START: teardown, run setup
            "between_runs_s": round(statistics.mean(run_gaps), 2) if run_gaps else None,
            "stage_tail_s": round(statistics.mean(tails), 2),
            "events_per_step": round(events / len(steps), 1), "event_write_s": write_s,
            "overhead_per_step_s": round((wall - compute) / len(steps), 2)}  # fmt: skip


def measure_batched(tmp: Path, shards: int) -> dict:
    """The per-shard stages as backfills of batches run them: one run over every shard group
    per stage (a partition range), then the classifiers; per step and per group."""
    from dagster import DagsterInstance

    from foundation.partitions import RANGE_END, RANGE_START

    keys = _prepare(tmp / f"{MODE}-batched", shards)
    batch = {RANGE_START: keys[0], RANGE_END: keys[-1]}
    stages = (("raw_shards", batch), ("quality_classifier", {}), ("toxicity_classifier", {}),
              ("filtered_shards", batch), ("minhash_signatures", batch))  # fmt: skip
    steps, wall = [], 0.0
    with DagsterInstance.get() as instance:
        for stage, tags in stages:
            started = time.time()
            run_id = _run(instance, stage, tags)
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
    parser.add_argument("--batched", action="store_true",
                        help="each per-shard stage one run over every group, as backfills run")  # fmt: skip
    args = parser.parse_args()
    from tests.servers.ray_cluster import node_env, ray_cluster

    load_before = os.getloadavg()
    probes = {
        "import_dagster_s": _cold("import dagster"),
        "import_definitions_s": _cold("import app.ray_definitions"),
    }
    results: dict = {"bench": "ray_step_overhead", "probes": probes}
    with tempfile.TemporaryDirectory() as tmp_name, ray_cluster(Path(tmp_name)) as cluster:
        os.environ.update({"RAY_ADDRESS": cluster.dashboard_url, "PYTHONPATH": str(ROOT),
                           "POLARS_MAX_THREADS": "1", "PATH": node_env()["PATH"]})  # fmt: skip
        probes["noop_ray_job_s"] = _noop_job(cluster.dashboard_url)
        run = measure_batched if args.batched else measure
        results[MODE] = run(Path(tmp_name), args.shards)
        print(MODE, results[MODE], flush=True)
    results["load_average"] = {"before": [round(x, 2) for x in load_before],
                               "after": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
