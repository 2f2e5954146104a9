"""Sensors and schedules never redo work that is current (issue 26, §4).

After ``make demo`` the daemon's first ``eval_sensor`` tick launched ``evaluate`` again for a
checkpoint the demo had evaluated minutes before. Here, on a real Dagster instance: a checkpoint
is materialized the way the training op does it (:func:`jobs.training.checkpoint_materialization`),
its report with the real ``eval_reports`` code version, then one sensor tick requests nothing
(nor for a checkpoint keep-last-K has deleted since); a new checkpoint, and the same key
re-made by another run, are evaluated. The shard discovery
sensor after ``pretrain data``'s registration and the backfill schedule after the per-shard
chain was materialized request nothing either. Run::

    .venv/bin/pytest -q tests/dagster/test_sensors_current_work.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    AssetSpec,
    DagsterInstance,
    MaterializeResult,
    SensorResult,
    SkipReason,
    asset,
    build_schedule_context,
    build_sensor_context,
    job,
    materialize,
    op,
)

from app.definitions import build_definitions
from foundation.data_versions import current_inputs, latest_tags
from foundation.partitions import checkpoint_partitions
from foundation.shards import plan_sources, register_shards
from jobs.training import checkpoint_materialization
from resources.sources import ShardSource
from resources.storage import ArtifactStore
from sensors.backfill_schedule import shard_backfill_schedule
from sensors.shard_discovery import shard_discovery_sensor
from tests.helpers.checkpoints import committed_key, eval_ticks, sqlite_instance


@pytest.fixture
def instance(tmp_path: Path):
    with sqlite_instance(tmp_path) as inst:
        yield inst


def commit_checkpoint(instance: DagsterInstance, root: Path, key: str) -> Path:
    """A committed checkpoint folder under ``root/runs`` and its ``checkpoints[key]``
    materialization as the ``train`` op logs it, from a run of its own."""
    path = committed_key(root, key)

    @op(name="train_model")
    def train_model(context) -> None:
        context.instance.add_dynamic_partitions(checkpoint_partitions.name, [key])
        step = int(key.rsplit("-s", 1)[1])
        event = {"key": key, "step": step, "path": str(path), "loss": 2.5}
        context.log_event(checkpoint_materialization(event, context.run_id))

    @job(name="train")
    def train() -> None:
        train_model()

    assert train.execute_in_process(instance=instance).success
    return path


def evaluate(instance: DagsterInstance, key: str, code_version: str) -> None:
    """``eval_reports[key]`` by a stand-in with the real asset's key, inputs and code version."""

    @asset(
        key="eval_reports",
        partitions_def=checkpoint_partitions,
        deps=[AssetSpec("checkpoints", partitions_def=checkpoint_partitions), "tokenizer"],
        code_version=code_version,
    )
    def eval_reports() -> MaterializeResult:
        return MaterializeResult(metadata={"val_loss": 2.5})

    assert materialize([eval_reports], instance=instance, partition_key=key).success


def test_eval_sensor_skips_checkpoints_evaluated_with_the_current_checkpoint(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    root = tmp_path / "artifacts"
    repository, tick = eval_ticks(instance, root)
    code_version = repository.asset_graph.get(AssetKey("eval_reports")).code_version
    pruned = commit_checkpoint(instance, root, "b00-s000000100")
    shutil.rmtree(pruned)  # keep-last-K deleted it before the demo evaluated what was left
    for key in ("b00-s000000300", "b00-s000000600"):  # two commits between two ticks
        commit_checkpoint(instance, root, key)
        evaluate(instance, key, code_version)  # the demo evaluates in process

    first = tick(None)  # the daemon's first tick after the demo
    assert first.run_requests == [], [r.partition_key for r in first.run_requests]
    assert first.skip_reason.skip_message == (
        "every new checkpoint is evaluated already (b00-s000000300, b00-s000000600) "
        "or pruned (b00-s000000100)"
    )
    commit_checkpoint(instance, root, "b00-s000000900")
    second = tick(first.cursor)
    assert [r.partition_key for r in second.run_requests] == ["b00-s000000900"]
    # the same key written again by another run (a new branch history): evaluated again
    commit_checkpoint(instance, root, "b00-s000000600")
    third = tick(second.cursor)
    assert [r.partition_key for r in third.run_requests] == ["b00-s000000600"]
    assert third.run_requests[0].run_key not in {r.run_key for r in second.run_requests}
    evaluate(instance, "b00-s000000600", code_version)
    assert tick(None).run_requests == second.run_requests  # from scratch: only 900 is left
    # a report made by another code version of eval_reports is not current
    tags = latest_tags(instance, "eval_reports")["b00-s000000300"]
    assert current_inputs(tags, code_version, {}) and not current_inputs(tags, "eval-v0", {})


def test_discovery_after_pretrain_data_registered_the_folder_requests_nothing(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    src = tmp_path / "src"
    for folder, name in ((src, "a.jsonl"), (src / "more", "b.jsonl"), (src, "c.jsonl")):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps({"text": f"document {name}"}) + "\n")
    store = ArtifactStore(root=str(tmp_path / "artifacts"))
    # what `pretrain data --source src --add-source web=src/more` registers
    manifests = plan_sources([("web", str(src)), ("web", str(src / "more"))], max_shards=2)
    assert register_shards(instance, store, manifests) == ["web-0000", "web-0001"]
    resources = {"store": store, "shard_source": ShardSource(uri=str(src), source_name="web")}
    with build_sensor_context(instance=instance, resources=resources) as context:
        result = shard_discovery_sensor(context)
    # it requests nothing; it records the listing it saw (its cursor), so the next tick is idle
    assert isinstance(result, SensorResult) and not result.run_requests
    assert result.skip_reason and "no new files" in result.skip_reason.skip_message
    assert result.cursor


@pytest.mark.slow
def test_backfill_schedule_after_the_shard_chain_requests_nothing(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    lines = [json.dumps({"text": f"Entry {i}. " + "The committee met to review the budget. " * 12})
             for i in range(12)]  # fmt: skip
    (src / "a.jsonl").write_text("\n".join(lines) + "\n")
    root = str(tmp_path / "artifacts")
    defs = build_definitions(artifact_root=root)
    (key,) = register_shards(
        instance, ArtifactStore(root=root), plan_sources([("web", str(src))], max_shards=1)
    )
    steps = (("raw_shards", key), ("quality_classifier", None), ("toxicity_classifier", None),
             ("filtered_shards", key), ("minhash_signatures", key))  # fmt: skip
    for job_name, partition in steps:
        result = defs.resolve_job_def(f"{job_name}_job").execute_in_process(
            instance=instance, partition_key=partition
        )
        assert result.success, job_name
    context = build_schedule_context(instance=instance, repository_def=defs.get_repository_def())
    skip = shard_backfill_schedule(context)
    assert isinstance(skip, SkipReason) and skip.skip_message == "all 1 shards are current"
    # a new quality classifier (other settings) makes the filtered shard stale: one run
    result = defs.resolve_job_def("quality_classifier_job").execute_in_process(
        instance=instance, run_config={"ops": {"quality_classifier": {"config": {"seed": 7}}}}
    )
    assert result.success
    requests = shard_backfill_schedule(context)
    assert [(r.partition_key, [k.path[-1] for k in r.asset_selection]) for r in requests] == [
        (key, ["filtered_shards", "minhash_signatures"])
    ]
