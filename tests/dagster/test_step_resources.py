"""Per-step sizing and retries: op tags that dagster-ray reads, bad input and a store that
refuses writes (a full disk) not retried."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from app.definitions import build_definitions
from foundation.shards import plan_source, register_shards
from foundation.step_resources import RAY_CONFIG_TAG, STEP_RESOURCES
from pretrain import storage
from resources.storage import ArtifactStore

DATA_STEPS = ("raw_shards", "filtered_shards", "minhash_signatures", "dedup_pairs",
              "dedup_clusters", "deduped_shards")  # fmt: skip


def test_every_data_step_declares_cpu_memory_and_retries(tmp_path) -> None:
    graph = build_definitions(artifact_root=str(tmp_path)).resolve_asset_graph()
    for name in DATA_STEPS:
        node = graph.get(AssetKey(name))
        tags = node.assets_def.op.tags
        ray = json.loads(tags[RAY_CONFIG_TAG])
        assert ray == json.loads(STEP_RESOURCES[name][RAY_CONFIG_TAG]), name
        assert ray["num_cpus"] >= 1 and ray["memory"] >= 256 << 20, name
        assert node.assets_def.op.retry_policy.max_retries == 2, name
    try:  # the executor that reads the tag parses it the same way
        from dagster_ray.configs import RayExecutionConfig
    except ImportError:
        return
    parsed = RayExecutionConfig.from_tags(STEP_RESOURCES["dedup_pairs"])
    assert (parsed.num_cpus, parsed.memory) == (1, 512 << 20)


def test_bad_input_fails_once_with_its_reason(tmp_path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("shards", ["missing-0000"])  # no manifest written
        result = defs.resolve_job_def("raw_shards_job").execute_in_process(
            instance=instance, partition_key="missing-0000", raise_on_error=False
        )
    assert not result.success
    assert not [e for e in result.all_events if e.is_step_up_for_retry]
    (failure,) = [e.step_failure_data for e in result.all_events if e.is_step_failure]
    reason = failure.user_failure_data.description
    assert reason.startswith("DataError: ") and "missing-0000.json does not exist" in reason


def test_a_full_disk_fails_once_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC in a step: one failure that names the file and says what to do, no retry (three
    attempts would fail alike; the rerun after space is freed does the work)."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.jsonl").write_text('{"text": "one document of plain words"}\n')
    root = str(tmp_path / "artifacts")
    defs = build_definitions(artifact_root=root)
    with DagsterInstance.ephemeral() as instance:
        [key] = register_shards(instance, ArtifactStore(root=root), plan_source(str(source)))

        def full(data: bytes, target: Path) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(storage, "_write_local", full)  # the one local file write
        result = defs.resolve_job_def("raw_shards_job").execute_in_process(
            instance=instance, partition_key=key, raise_on_error=False
        )
    assert not result.success
    assert not [e for e in result.all_events if e.is_step_up_for_retry]
    (failure,) = [e.step_failure_data for e in result.all_events if e.is_step_failure]
    reason = failure.user_failure_data.description
    assert reason.startswith(f"StorageError: cannot write {root}/raw_shards/{key}/"), reason
    assert "no space left on the device: free space" in reason
