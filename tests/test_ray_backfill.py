"""Backfills on a real two-node Ray cluster (head + worker, separate processes) via dagster-ray.

One run per partition, launched through Dagster (``execute_job`` on a SQLite instance); every
step is a Ray job (``jobs/ray_jobs.py``). The test checks, against an in-process run of the
same definitions on the same corpus:

- ingest → quality → shard_pipeline per shard, ``band_pairs`` per band partition and the
  ``dedup`` union: every artifact is byte-identical;
- a shard whose manifest is missing fails with that reason while the others complete;
- the worker node SIGKILLed while a step runs on it: the step fails its health check, the
  asset's RetryPolicy runs it again (on the head), the run succeeds, outputs are identical
  and no temp file or half-written partition is visible.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, execute_job, reconstructable

from pretrain import storage
from pretrain_assets.definitions import build_definitions
from pretrain_assets.partitions import band_partitions
from pretrain_assets.shards import plan_source, register_shards
from resources.process_tree import descendants
from resources.storage import ArtifactStore
from tests.ray_cluster import ray_available, ray_cluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not ray_available(), reason="needs the ray extra: pip install -e '.[ray]'"),
]
SHARD_FILES = ("documents.parquet", "rejects.parquet")


def _in_process(root: Path, manifests) -> None:
    defs = build_definitions(artifact_root=str(root))
    with DagsterInstance.ephemeral() as instance:
        keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)

        def run(job: str, partition: str | None = None) -> None:
            result = defs.resolve_job_def(job).execute_in_process(
                instance=instance, partition_key=partition
            )
            assert result.success, (job, partition)

        for key in keys:
            run("ingest", key)
        run("quality")
        for key in keys:
            run("shard_pipeline", key)
        for band in band_partitions.get_partition_keys():
            run("band_pairs", band)
        run("dedup")


def _artifacts(root: Path) -> dict[str, bytes]:
    """Every data artifact's bytes by relative path (stats files hold timings: skipped)."""
    out = {}
    for path in sorted(root.rglob("*.parquet")):
        out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _backfill(run, factory, partitions: list[str], width: int = 2) -> dict[str, tuple]:
    """One run per partition, ``width`` at a time (daemon threads: a hung run cannot block
    the interpreter's exit); returns {partition: (success, events)}."""
    results: dict[str, tuple] = {}
    pending = list(partitions)
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not pending:
                    return
                key = pending.pop(0)
            results[key] = run(factory, key)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(width)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert sorted(results) == sorted(partitions), "a run did not finish in 10 minutes"
    return results


def _failures(events) -> list[str]:
    return [str(e.message) + str(e.event_specific_data)[:2000] for e in events
            if e.is_step_failure or e.is_step_up_for_retry or e.is_run_failure]  # fmt: skip


def _on_worker(cluster) -> bool:
    """True while a ``dagster api execute_step`` process runs under the worker node."""
    if cluster.worker is None:
        return False
    for pid in descendants(cluster.worker.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"execute_step" in cmdline:
            return True
    return False


def test_backfill_on_ray_matches_in_process_and_survives_a_lost_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs import ray_jobs

    manifests = plan_source("embedded", max_shards=2, max_files_per_source=12)
    # artifacts record their input URIs (clusters' shard column, footers): same root for both
    root, home = tmp_path / "artifacts", tmp_path / "home"
    _in_process(root, manifests)
    reference = _artifacts(root)
    root.rename(tmp_path / "reference")

    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with ray_cluster(tmp_path, head_cpus=1, worker_cpus=1) as cluster:
        for name, value in {"DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root),
                            "RAY_JOBS_ADDRESS": cluster.dashboard_url,
                            "PYTHONPATH": cluster.env["PYTHONPATH"],
                            "POLARS_MAX_THREADS": "1"}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        ray_jobs.ray_definitions.cache_clear()
        with DagsterInstance.get() as instance:
            keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)
            instance.add_dynamic_partitions("shards", ["missing-0000"])  # no manifest written

            def run(factory, partition: str | None = None):
                tags = {"dagster/partition": partition} if partition else {}
                with execute_job(reconstructable(factory), instance, tags=tags) as result:
                    return result.success, result.all_events

            outcomes = {key: run(ray_jobs.ingest_on_ray, key) for key in [*keys, "missing-0000"]}
            assert [outcomes[k][0] for k in keys] == [True, True]
            assert outcomes["missing-0000"][0] is False
            events = outcomes["missing-0000"][1]
            (failure,) = [e.step_failure_data for e in events if e.is_step_failure]
            assert "missing-0000.json does not exist" in failure.user_failure_data.description
            assert not [e for e in events if e.is_step_up_for_retry]  # bad input: no retry
            assert run(ray_jobs.quality_on_ray)[0]

            # the shard backfill 2 runs at a time: with 1 CPU per node and 1 CPU per step, the
            # second concurrent step runs on the worker, which is SIGKILLed while it does
            killed = threading.Event()

            def kill_worker_once() -> None:
                deadline = time.monotonic() + 600
                while not killed.is_set() and time.monotonic() < deadline:
                    if _on_worker(cluster):
                        cluster.kill_worker()
                        killed.set()
                    time.sleep(0.2)

            watcher = threading.Thread(target=kill_worker_once, daemon=True)
            watcher.start()
            results = _backfill(run, ray_jobs.shard_pipeline_on_ray, keys)
            assert killed.is_set(), "no step was scheduled on the worker node"
            assert {k: ok for k, (ok, _) in results.items()} == dict.fromkeys(keys, True), {
                k: _failures(events) for k, (_, events) in results.items()
            }
            retries = [
                e for _, events in results.values() for e in events if e.is_step_up_for_retry
            ]
            assert retries, "the step on the killed worker was not retried"

            # dedup reads every registered shard: the operator drops the broken one first
            instance.delete_dynamic_partition("shards", "missing-0000")
            for band in band_partitions.get_partition_keys():
                ok, events = run(ray_jobs.band_pairs_on_ray, band)
                assert ok, (band, _failures(events))
            ok, events = run(ray_jobs.dedup_on_ray)
            assert ok, _failures(events)

    ours = _artifacts(root)
    assert sorted(ours) == sorted(reference)
    assert [p for p in ours if ours[p] != reference[p]] == []
    leftovers = [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    assert storage.exists(str(root / "dedup_clusters" / "clusters.parquet"))
