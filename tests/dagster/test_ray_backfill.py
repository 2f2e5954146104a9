"""Backfills on a real two-node Ray cluster (head + worker, separate processes).

One run per partition, launched through Dagster (``execute_job`` on a SQLite instance, each
run in a process of its own: ``executors/partition_runs.py``); every step runs on a warm actor of
the cluster's step pool (``app/ray_definitions.py`` → ``executors/ray_executor.py``), except the
``quality`` stage, which goes through dagster-ray's job executor (``quality_on_ray_jobs``) so
that both executors stay tested. The test checks, against an in-process run of the same
definitions on the same corpus:

- ingest → quality → shard_pipeline per shard, ``band_pairs`` per band partition and the
  ``dedup`` union: every artifact is byte-identical;
- every actor-path step ran on a ``StepWorker`` actor (its engine event names the actor, its
  node and its pid), on both nodes, actors served several steps each, and the only Ray jobs
  submitted were the quality stage's;
- a shard whose manifest is missing fails with that reason while the others complete;
- the worker node SIGKILLed while a step runs on it: the step fails its health check, the
  asset's RetryPolicy runs it again on another node, the run succeeds, outputs are identical
  and no temp file or half-written partition is visible.
"""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from app.definitions import build_definitions
from executors.partition_runs import PartitionRunner
from foundation.partitions import band_partitions
from foundation.shards import plan_source, register_shards
from pretrain import storage
from resources.process_tree import descendants
from resources.storage import ArtifactStore
from tests.helpers.pipelines import materialize_data_stages
from tests.servers.ray_cluster import ray_available, ray_cluster

# the ray extra is installed by `make test` only: a fresh clone's `make test-fast` must collect
# this module, so it is imported here and skips the module without it
ray_job_submission = pytest.importorskip(
    "ray.job_submission", reason="needs the ray extra: pip install -e '.[ray]'"
)
JobSubmissionClient, JobType = ray_job_submission.JobSubmissionClient, ray_job_submission.JobType

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not ray_available(), reason="needs the ray extra: pip install -e '.[ray]'"),
]
RAY_JOBS = "app.ray_definitions"


def _in_process(root: Path, manifests) -> None:
    defs = build_definitions(artifact_root=str(root))
    with DagsterInstance.ephemeral() as instance:
        keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)
        materialize_data_stages(defs, instance, keys)


def _artifacts(root: Path) -> dict[str, bytes]:
    """Every data artifact's bytes by relative path (stats files hold timings: skipped)."""
    out = {}
    for path in sorted(root.rglob("*.parquet")):
        out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _executing_on_worker(cluster) -> set[int]:
    """PIDs of step worker actors under the worker node that are running a step (Ray titles
    the process ``ray::StepWorker.execute`` during the call)."""
    if cluster.worker is None:
        return set()
    found = set()
    for pid in descendants(cluster.worker.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"StepWorker.execute" in cmdline:
            found.add(pid)
    return found


def _reported_pids(job: str) -> set[int]:
    """PIDs of the actors whose step of a started ``job`` run has reported itself (the actor's
    engine event, written as the step starts: the record a retried attempt leaves)."""
    pids = set()
    with DagsterInstance.get() as instance:
        runs = instance.get_runs(RunsFilter(job_name=job, statuses=[DagsterRunStatus.STARTED]))
        for step in _actor_steps([r.run_id for r in runs]):
            pids.add(int(step["pid"]))
    return pids


def _submitted(cluster) -> list:
    """Ray jobs submitted through the job API (the runs' own drivers are listed too: skipped)."""
    jobs = JobSubmissionClient(cluster.dashboard_url).list_jobs()
    return [j for j in jobs if j.type == JobType.SUBMISSION]


def _actor_steps(run_ids: list[str]) -> list[dict[str, str]]:
    """Per step attempt: the actor that ran it (from the worker's engine event)."""
    found = []
    with DagsterInstance.get() as instance:
        for run_id in run_ids:
            for entry in instance.all_logs(run_id):
                event = entry.dagster_event
                if event is None or "on Ray actor" not in (event.message or ""):
                    continue
                metadata = event.engine_event_data.metadata
                found.append({"run_id": run_id, "step": entry.step_key,
                              **{k: v.value for k, v in metadata.items()}})  # fmt: skip
    return found


def test_backfill_on_ray_matches_in_process_and_survives_a_lost_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = plan_source("embedded", max_shards=2, max_files_per_source=12)
    # artifacts record their input URIs (clusters' shard column, footers): same root for both
    root, home = tmp_path / "artifacts", tmp_path / "home"
    _in_process(root, manifests)
    reference = _artifacts(root)
    root.rename(tmp_path / "reference")

    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with ExitStack() as stack:
        cluster = stack.enter_context(ray_cluster(tmp_path, head_cpus=1, worker_cpus=1))
        for name, value in {"DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root),
                            "RAY_ADDRESS": cluster.address,
                            "RAY_JOBS_ADDRESS": cluster.dashboard_url,
                            "PYTHONPATH": cluster.env["PYTHONPATH"],
                            "POLARS_MAX_THREADS": "1"}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        with DagsterInstance.get() as instance:
            keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)
            instance.add_dynamic_partitions("shards", ["missing-0000"])  # no manifest written

        runner = stack.enter_context(PartitionRunner())  # one server: imports paid once
        ingested = runner.run(f"{RAY_JOBS}:ingest_on_ray", [*keys, "missing-0000"])
        assert [ingested[k]["success"] for k in keys] == [True, True], ingested
        bad = ingested["missing-0000"]
        assert bad["success"] is False and bad["retries"] == 0  # bad input: no retry
        assert "missing-0000.json does not exist" in bad["failures"][0]
        # the quality stage through dagster-ray's job executor, a Ray job per step (the quality
        # and toxicity classifiers): the only Ray jobs of the test
        assert runner.run(f"{RAY_JOBS}:quality_on_ray_jobs", [None])[None]["success"]
        jobs = [j.metadata.get("dagster/job") for j in _submitted(cluster)]
        assert jobs == ["quality", "quality"], jobs

        # the shard backfill 2 runs at a time: with 1 CPU per node and 1 CPU per step, the
        # second concurrent step runs on the worker, which is SIGKILLed while it does
        killed = threading.Event()

        def kill_worker_once() -> None:
            deadline = time.monotonic() + 600
            while not killed.is_set() and time.monotonic() < deadline:
                # only once the step has reported itself: a kill before that leaves no record
                # of the first attempt, and the retry's node could not be told from it
                running = _executing_on_worker(cluster)
                if running and running & _reported_pids("shard_pipeline"):
                    cluster.kill_worker()
                    killed.set()
                time.sleep(0.2)

        watcher = threading.Thread(target=kill_worker_once, daemon=True)
        watcher.start()
        results = runner.run(f"{RAY_JOBS}:shard_pipeline_on_ray", keys, width=2)
        assert killed.is_set(), "no step was scheduled on the worker node"
        assert all(results[k]["success"] for k in keys), results
        assert sum(r["retries"] for r in results.values()) >= 1, results
        # each attempt ran on a step worker actor; the killed attempt's retry on another node
        attempts = _actor_steps([results[k]["run_id"] for k in keys])
        retried = [a for a in attempts
                   if sum(b["run_id"] == a["run_id"] and b["step"] == a["step"]
                          for b in attempts) > 1]  # fmt: skip
        assert len(attempts) == 2 * len(keys) + len(retried) // 2, attempts
        assert len({a["node_id"] for a in retried}) == 2, retried

        # dedup reads every registered shard: the operator drops the broken one first
        with DagsterInstance.get() as instance:
            instance.delete_dynamic_partition("shards", "missing-0000")
        bands = runner.run(f"{RAY_JOBS}:band_pairs_on_ray", band_partitions.get_partition_keys())
        assert [k for k, r in bands.items() if not r["success"]] == [], bands
        clusters = runner.run(f"{RAY_JOBS}:dedup_on_ray", [None])[None]
        assert clusters["success"], clusters

        # every actor-path step: on a step worker actor, on both nodes, actors reused (warm)
        actor_runs = [r["run_id"] for outcome in (ingested, results, bands)
                      for r in outcome.values()] + [clusters["run_id"]]  # fmt: skip
        attempts = _actor_steps(actor_runs)
        assert len(attempts) >= 2 + 2 * len(keys) + len(bands) + 1, attempts  # ingest ok ×2
        assert len({a["node_id"] for a in attempts}) == 2
        assert max(int(a["steps_run"]) for a in attempts) >= 5, attempts
        assert len(_submitted(cluster)) == len(jobs)  # still only the quality steps' Ray jobs

    ours = _artifacts(root)
    assert sorted(ours) == sorted(reference)
    assert [p for p in ours if ours[p] != reference[p]] == []
    leftovers = [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    assert storage.exists(str(root / "dedup_clusters" / "clusters.parquet"))
