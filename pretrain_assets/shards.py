"""Register shard groups: plan manifests from a source, store them, add the partitions.

Used by the demo and by the shard-discovery sensor. A source is ``"embedded"`` (the text
already on this machine) or a local folder / ``s3://`` prefix of JSONL, Parquet or WARC.
"""

from __future__ import annotations

from dagster import DagsterInstance

from jobs.partitions import shard_partitions
from pretrain import storage
from pretrain.data.harvest import discover_embedded
from pretrain.data.raw import ShardManifest, list_source_files, plan_shards
from resources.storage import ArtifactStore


def plan_source(
    source: str,
    *,
    source_name: str = "web",
    max_shards: int = 4,
    files_per_shard: int | None = None,
    max_files_per_source: int | None = None,
) -> list[ShardManifest]:
    if source == "embedded":
        files = discover_embedded(max_files_per_source=max_files_per_source)
        prefix = "embedded"
    else:
        files = list_source_files(source, source_name)
        prefix = source_name
    return plan_shards(files, files_per_shard=files_per_shard, max_shards=max_shards, prefix=prefix)


def register_shards(
    instance: DagsterInstance, store: ArtifactStore, manifests: list[ShardManifest]
) -> list[str]:
    """Write each manifest, then add its key to the ``shards`` partitions; returns new keys."""
    existing = set(instance.get_dynamic_partitions(shard_partitions.name))
    for manifest in manifests:
        storage.write_bytes(manifest.to_json().encode(), store.manifest_uri(manifest.key))
    new_keys = [m.key for m in manifests if m.key not in existing]
    if new_keys:
        instance.add_dynamic_partitions(shard_partitions.name, new_keys)
    return [m.key for m in manifests]
