"""Per-shard assets run a batch of shard groups in one run, each group with its own identity.

A backfill of thousands of groups must not pay a run per group (``BackfillPolicy.multi_run``:
``foundation/per_shard.py``). Here one run materializes three groups of real text (the
embedded corpus): each group gets its own materialization, with its own data version (the
output's identity), the input versions Dagster itself records on a one-group run, and its own
check evaluations; the backfill schedule then finds every group current. A group whose input
is bad fails the run with its name and reason, and the others of the batch are done.

    .venv/bin/pytest -q tests/dagster/test_per_shard_batches.py
"""

from __future__ import annotations

from pathlib import Path

from dagster import AssetKey, DagsterInstance, build_schedule_context

from app.definitions import build_definitions
from foundation.shards import plan_source, register_shards
from pretrain import identity
from pretrain_assets.filter import filter_code_version
from resources.storage import ArtifactStore
from sensors.backfill_schedule import shard_backfill_schedule

RANGE = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def batch(defs, instance: DagsterInstance, job: str, keys: list[str]):
    return defs.resolve_job_def(f"{job}_job").execute_in_process(
        instance=instance, tags={RANGE[0]: keys[0], RANGE[1]: keys[-1]}, raise_on_error=False
    )


def latest_tags(instance: DagsterInstance, asset: str) -> dict[str, dict[str, str]]:
    records = instance.fetch_materializations(AssetKey(asset), limit=100).records
    found: dict[str, dict[str, str]] = {}
    for record in records:  # newest first
        found.setdefault(record.partition_key, dict(record.asset_materialization.tags or {}))
    return found


def test_a_batch_records_every_group_as_a_run_of_its_own_would(tmp_path: Path) -> None:
    root = str(tmp_path / "artifacts")
    defs = build_definitions(artifact_root=root)
    store = ArtifactStore(root=root)
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:  # keeps check partitions
        manifests = plan_source("embedded", max_shards=3, max_files_per_source=6)
        keys = register_shards(instance, store, manifests)
        assert len(keys) == 3
        for job in ("raw_shards",):
            assert batch(defs, instance, job, keys).success
        for job in ("quality_classifier", "toxicity_classifier"):
            assert defs.resolve_job_def(f"{job}_job").execute_in_process(instance=instance).success
        assert batch(defs, instance, "filtered_shards", keys).success
        assert batch(defs, instance, "minhash_signatures", keys).success
        assert len(instance.get_runs()) == 5  # one run per stage, not one per group
        raw, filtered = (
            latest_tags(instance, "raw_shards"),
            latest_tags(instance, "filtered_shards"),
        )
        for key in keys:
            made = identity.read(store.uri("filtered_shards", key))
            assert made is not None and filtered[key]["dagster/data_version"] == made.version
            assert filtered[key]["dagster/code_version"] == filter_code_version()
        assert len({t["dagster/data_version"] for t in filtered.values()}) == 3  # its own each
        # the same group again, alone: the tags a one-group run records are the batch's
        alone = defs.resolve_job_def("filtered_shards_job").execute_in_process(
            instance=instance, partition_key=keys[1]
        )
        assert alone.success
        again = latest_tags(instance, "filtered_shards")[keys[1]]
        assert {k: v for k, v in again.items() if "event_pointer" not in k} == {
            k: v for k, v in filtered[keys[1]].items() if "event_pointer" not in k
        }
        assert (
            again["dagster/input_data_version/raw_shards"] != raw[keys[1]]["dagster/data_version"]
        )
        checks = instance.event_log_storage.get_asset_check_execution_history(
            _check_key("minhash_signatures", "one_signature_per_document"), limit=20
        )
        evaluated = {r.partition for r in checks}
        assert set(keys) <= evaluated  # one evaluation per group
        repository = defs.get_repository_def()
        context = build_schedule_context(instance=instance, repository_def=repository)
        skip = shard_backfill_schedule(context)
        assert skip.skip_message == "all 3 shards are current", skip


def _check_key(asset: str, name: str):
    from dagster import AssetCheckKey

    return AssetCheckKey(AssetKey(asset), name)


def test_a_bad_group_fails_its_batch_by_name_and_the_others_are_done(tmp_path: Path) -> None:
    root = str(tmp_path / "artifacts")
    defs = build_definitions(artifact_root=root)
    store = ArtifactStore(root=root)
    with DagsterInstance.ephemeral() as instance:
        keys = register_shards(instance, store, plan_source("embedded", max_shards=2,
                                                            max_files_per_source=4))  # fmt: skip
        instance.add_dynamic_partitions("shards", ["nomanifest-0000"])  # a group without files
        result = batch(defs, instance, "raw_shards", [keys[0], "nomanifest-0000"])
        assert not result.success
        assert not [e for e in result.all_events if e.is_step_up_for_retry]  # fails alike again
        (failure,) = [e.step_failure_data for e in result.all_events if e.is_step_failure]
        reason = failure.user_failure_data.description
        assert "nomanifest-0000: DataError:" in reason and "the rest are done" in reason
        done = instance.get_materialized_partitions(AssetKey("raw_shards"))
        assert keys[0] in done and "nomanifest-0000" not in done
