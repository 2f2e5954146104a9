"""Shared test helpers (moved from test_discovery_backfill.py); tests import these, never each other."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from dagster import (
    AssetKey,
    DagsterInstance,
    SensorResult,
    SkipReason,
    build_sensor_context,
)

from app.definitions import build_definitions
from foundation.partitions import band_partitions
from foundation.shards import plan_source, register_shards
from pretrain import storage
from pretrain.data.raw import RawFile
from resources.sources import ShardSource
from resources.storage import ArtifactStore
from sensors.shard_discovery import shard_discovery_sensor


def raw(name: str) -> RawFile:
    return RawFile(uri=f"/data/{name}.jsonl", source="web", kind="jsonl")


def write_jsonl(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{name}.jsonl.gz", "wt") as f:
        f.write(json.dumps({"text": f"document {name}"}) + "\n")


def run_discovery(instance: DagsterInstance, tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    for name in ("a", "b", "c", "d"):
        write_jsonl(incoming, name)
    resources = {
        "store": ArtifactStore(root=str(tmp_path / "artifacts")),
        "shard_source": ShardSource(uri=str(incoming), source_name="web", files_per_shard=2),
    }

    def tick(resources: dict, cursor: str | None = None) -> Any:  # the store restores
        with build_sensor_context(instance=instance, resources=resources,  # AWS_ENDPOINT_URL
                                  cursor=cursor) as context:  # fmt: skip
            return shard_discovery_sensor(context)

    result = tick(resources)
    assert isinstance(result, SensorResult)
    (request,) = result.dynamic_partitions_requests
    assert request.partitions_def_name == "shards"
    assert list(request.partition_keys) == ["web-0000", "web-0001"]
    assert [(r.run_key, r.partition_key) for r in result.run_requests] == [
        ("ingest-web-0000", "web-0000"),
        ("ingest-web-0001", "web-0001"),
    ]
    replay = tick(resources)  # a replayed tick (no cursor): the index holds every file
    assert isinstance(replay, SensorResult) and not replay.run_requests
    assert replay.skip_reason and replay.cursor == result.cursor  # nothing planned twice
    assert isinstance(tick(resources, result.cursor), SkipReason)  # the same listing: idle
    write_jsonl(incoming, "e")
    write_jsonl(incoming, "f")
    later = tick(resources)
    assert list(later.dynamic_partitions_requests[0].partition_keys) == ["web-0002"]
    off = tick({**resources, "shard_source": ShardSource()})
    assert isinstance(off, SkipReason) and "ShardSource.uri" in off.skip_message


ASSETS = ["raw_shards", "quality_classifier", "toxicity_classifier", "filtered_shards", "minhash_signatures",
          "dedup_pairs", "dedup_clusters", "deduped_shards"]  # fmt: skip


def run_job(defs: Any, instance: DagsterInstance, job: str, partition: str | None = None) -> None:
    """``<job>_job`` of ``defs`` in process (one partition or none), checked to succeed."""
    result = defs.resolve_job_def(f"{job}_job").execute_in_process(
        instance=instance, partition_key=partition
    )
    assert result.success, (job, partition)


def materialize_signatures(defs: Any, instance: DagsterInstance, keys: list[str]) -> None:
    """raw → classifiers → filter → signatures of the shards ``keys``, in process."""
    for key in keys:
        run_job(defs, instance, "raw_shards", key)
    run_job(defs, instance, "quality_classifier")
    run_job(defs, instance, "toxicity_classifier")
    for job in ("filtered_shards", "minhash_signatures"):
        for key in keys:
            run_job(defs, instance, job, key)


def materialize_dedup(defs: Any, instance: DagsterInstance) -> None:
    """Every band's pairs, then the clusters, in process."""
    for band_key in band_partitions.get_partition_keys():
        run_job(defs, instance, "dedup_pairs", band_key)
    run_job(defs, instance, "dedup_clusters")


def materialize_data_stages(defs: Any, instance: DagsterInstance, keys: list[str]) -> None:
    """raw → classifiers → filter → signatures → pairs → clusters, in process, each run checked."""
    materialize_signatures(defs, instance, keys)
    materialize_dedup(defs, instance)


def run_data_stages(
    root: str, endpoint: str | None, open_instance: Callable[[], DagsterInstance] | None = None
) -> dict:
    """Materialize the data stages under ``root`` in a fresh instance (ephemeral by default)."""
    defs = build_definitions(artifact_root=root, s3_endpoint_url=endpoint)
    manifests = plan_source("embedded", max_shards=2, max_files_per_source=12)
    with (open_instance or DagsterInstance.ephemeral)() as instance:
        keys = register_shards(instance, ArtifactStore(root=root), manifests)
        materialize_data_stages(defs, instance, keys)
        for key in keys:
            run_job(defs, instance, "deduped_shards", key)
        lineage = {
            asset: sorted(instance.get_materialized_partitions(AssetKey(asset)))
            or bool(instance.get_latest_materialization_event(AssetKey(asset)))
            for asset in ASSETS
        }
    outcome = {}
    for key in keys:
        kept = storage.read_table(storage.join(root, "deduped_shards", key, "documents.parquet"))
        dropped = pa.concat_tables(
            [
                storage.read_table(storage.join(root, stage, key, "rejects.parquet"))
                for stage in ("filtered_shards", "deduped_shards")
            ]
        )
        outcome[key] = (
            sorted(kept.column("id").to_pylist()),
            sorted(
                zip(
                    dropped.column("id").to_pylist(),
                    dropped.column("reason").to_pylist(),
                    strict=True,
                )
            ),
        )
    return {"keys": keys, "lineage": lineage, "outcome": outcome}
