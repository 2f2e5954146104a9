"""A batch of shard groups on a real two-node Ray cluster, through dagster-ray's executor.

A head and a worker node, separate processes (``tests/servers/ray_cluster.py``, stopped by
PID). One Dagster run of ``raw_shards`` over a partition range, as a backfill of batches
launches it (``dagster/asset_partition_range_start``/``_end``: ``foundation/per_shard.py``),
of three shard groups of the embedded corpus, the last registered without a manifest: launched
with ``execute_job(reconstructable(raw_shards_on_ray))`` on a SQLite instance, so the run's one
step is a Ray job submitted by dagster-ray's ``ray_executor`` (``app/ray_definitions.py``). The
test checks, against an in-process run of the same batch on the same corpus:

- the step ran as one Ray job, submitted through the job API, labelled with the run's job and
  id, the environment the step needs passed by name (``app.ray_definitions.PASSED_ENV``);
- each good group is materialized with its own data version (its identity's), the artifacts
  byte-identical to the in-process run's;
- the group without a manifest fails the run by name, without a retry, and is not
  materialized, while the others are;
- then the README's ``dagster asset materialize -m app.ray_definitions`` command (the module
  loaded as a code location, as ``dagster dev -m`` loads it) on one good group: it succeeds as a
  second Ray job, and the group's data version is unchanged.

    PYTHONPATH=$PWD .venv/bin/pytest -q tests/dagster/test_ray_backfill.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, execute_job, reconstructable

from app.definitions import build_definitions
from foundation.partitions import RANGE_END, RANGE_START
from foundation.shards import plan_source, register_shards
from pretrain import identity
from resources.storage import ArtifactStore
from tests.helpers.readme import readme_command
from tests.servers.ray_cluster import ROOT, ray_available, ray_cluster

# the ray extra is installed by `make test` only: a fresh clone's `make test-fast` must collect
# this module, so it is imported here and skips the module without it
ray_job_submission = pytest.importorskip(
    "ray.job_submission", reason="needs the ray extra: pip install -e '.[ray]'"
)
JobSubmissionClient, JobType = ray_job_submission.JobSubmissionClient, ray_job_submission.JobType

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not ray_available(), reason="needs the ray extra: pip install -e '.[ray]'"),
]
BAD = "missing-0000"  # a shard group registered without a manifest
MATERIALIZE = "dagster asset materialize -m app.ray_definitions"  # the README's command


def _batch(first: str, last: str) -> dict[str, str]:
    return {RANGE_START: first, RANGE_END: last}


def _register(instance: DagsterInstance, root: Path, manifests) -> list[str]:
    keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)
    instance.add_dynamic_partitions("shards", [BAD])  # after the good groups: last in the range
    return keys


def _in_process(root: Path, manifests) -> None:
    defs = build_definitions(artifact_root=str(root))
    with DagsterInstance.ephemeral() as instance:
        keys = _register(instance, root, manifests)
        result = defs.resolve_job_def("raw_shards_job").execute_in_process(
            instance=instance, tags=_batch(keys[0], BAD), raise_on_error=False
        )
        assert not result.success  # the bad group, as on Ray
        assert instance.get_materialized_partitions(AssetKey("raw_shards")) == set(keys)


def _artifacts(root: Path) -> dict[str, bytes]:
    """Every data artifact's bytes by relative path (stats files hold timings: skipped)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def _submitted(dashboard_url: str) -> list:
    """Ray jobs submitted through the job API."""
    jobs = JobSubmissionClient(dashboard_url).list_jobs()
    return [j for j in jobs if j.type == JobType.SUBMISSION]


def _materialize(key: str) -> subprocess.CompletedProcess:
    """The README's ``dagster asset materialize`` on shard group ``key``, as a shell runs it
    (this process's environment: the cluster, the instance, the root)."""
    command = readme_command(MATERIALIZE)
    assert command.argv[-2:] == ("--partition", "web-0000"), command.argv
    argv = [str(Path(sys.executable).parent / "dagster"), *command.argv[1:-1], key]
    return subprocess.run(argv, cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300)  # fmt: skip


def _latest_tags(instance: DagsterInstance, asset: str) -> dict[str, dict[str, str]]:
    records = instance.fetch_materializations(AssetKey(asset), limit=100).records
    found: dict[str, dict[str, str]] = {}
    for record in records:  # newest first
        assert record.partition_key is not None
        found.setdefault(record.partition_key, dict(record.asset_materialization.tags or {}))
    return found


def test_a_batch_of_shard_groups_runs_as_one_ray_job_each_group_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = plan_source("embedded", max_shards=2, max_files_per_source=6)
    # artifacts record their input URIs: the same root for both runs
    root, home = tmp_path / "artifacts", tmp_path / "home"
    _in_process(root, manifests)
    reference = _artifacts(root)
    assert reference
    root.rename(tmp_path / "reference")

    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with ray_cluster(tmp_path, head_cpus=1, worker_cpus=1) as cluster:
        for name, value in {"DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root),
                            "RAY_ADDRESS": cluster.dashboard_url,
                            "PYTHONPATH": cluster.env["PYTHONPATH"],
                            "POLARS_MAX_THREADS": "1"}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        import app.ray_definitions as on_ray

        on_ray.ray_definitions.cache_clear()  # built again with this test's PRETRAIN_ROOT
        store = ArtifactStore(root=str(root))
        with DagsterInstance.get() as instance:
            keys = _register(instance, root, manifests)
            assert len(keys) == 2
            job = reconstructable(on_ray.raw_shards_on_ray)
            with execute_job(job, instance, tags=_batch(keys[0], BAD)) as result:
                success, run_id, events = result.success, result.run_id, result.all_events
            latest = _latest_tags(instance, "raw_shards")
            done = instance.get_materialized_partitions(AssetKey("raw_shards"))
        submitted = _submitted(cluster.dashboard_url)
        ours = _artifacts(root)  # the batch's
        cli = _materialize(keys[0])
        assert cli.returncode == 0, cli.stdout[-4000:]
        with DagsterInstance.get() as instance:
            (again,) = instance.fetch_materializations(AssetKey("raw_shards"), limit=1).records
        assert len(_submitted(cluster.dashboard_url)) == 2  # the command's step: a Ray job too
    assert again.partition_key == keys[0] and again.run_id != run_id
    again_tags = again.asset_materialization.tags or {}
    assert again_tags["dagster/data_version"] == latest[keys[0]]["dagster/data_version"]

    # one step, one Ray job, with the step's environment
    (ray_job,) = submitted
    assert ray_job.metadata["dagster/job"] == "raw_shards_job", ray_job.metadata
    assert ray_job.metadata["dagster/run-id"] == run_id, ray_job.metadata
    passed = (ray_job.runtime_env or {}).get("env_vars", {})  # by name, from this process
    assert passed.get("PRETRAIN_ROOT") == str(root), passed
    assert passed.get("DAGSTER_RUN_STEP_KEY") == "raw_shards", passed
    starting = [e.message for e in events if e.event_type_value == "STEP_WORKER_STARTING"]
    assert len(starting) == 1 and "in Ray job" in (starting[0] or ""), starting

    # the bad group fails the run by name, once; the others are materialized, each its own
    assert not success
    assert not [e for e in events if e.is_step_up_for_retry]  # it would fail alike again
    (failure,) = [e.step_failure_data for e in events if e.is_step_failure]
    assert failure.user_failure_data is not None, failure
    reason = failure.user_failure_data.description or ""
    assert "1 of 3 shard groups of raw_shards failed (the rest are done)" in reason, reason
    assert f"{BAD}: DataError:" in reason and f"{BAD}.json does not exist" in reason, reason
    assert done == set(keys)
    for key in keys:
        made = identity.read(store.uri("raw_shards", key))
        assert made is not None and latest[key]["dagster/data_version"] == made.version, key
    assert len({latest[k]["dagster/data_version"] for k in keys}) == len(keys)

    assert sorted(ours) == sorted(reference)
    assert [p for p in ours if ours[p] != reference[p]] == []
    assert [p for p in root.rglob("*") if p.name.endswith(".tmp")] == []
