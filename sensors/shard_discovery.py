"""``shard_discovery_sensor``: new raw files → new ``shards`` partitions → ``ingest`` runs.

Lists the ``ShardSource`` folder or ``s3://`` prefix, plans shard groups for files that no
manifest holds yet (pure: :func:`pretrain.data.discovery.plan_new_shards`), writes their
manifests, adds the partitions and requests an ``ingest`` run for each. Run keys are the
shard keys, so a replayed tick never ingests a shard twice.
"""

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jobs.partitions import shard_partitions
from pretrain import storage
from pretrain.data.discovery import plan_new_shards
from pretrain.data.raw import ShardManifest, list_source_files
from resources.sources import ShardSource
from resources.storage import ArtifactStore


def registered_files(store: ArtifactStore) -> tuple[set[str], list[str]]:
    """File URIs held by existing manifests, and the existing shard keys."""
    uris: set[str] = set()
    keys: list[str] = []
    for manifest_uri in storage.list_files(store.uri("manifests"), (".json",)):
        manifest = ShardManifest.from_json(storage.read_bytes(manifest_uri).decode())
        keys.append(manifest.key)
        uris.update(f.uri for f in manifest.files)
    return uris, keys


@sensor(
    job_name="ingest",
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.STOPPED,
)
def shard_discovery_sensor(
    context: SensorEvaluationContext, store: ArtifactStore, shard_source: ShardSource
):
    if not shard_source.uri:
        return SkipReason("no ShardSource.uri configured: set it to a folder or s3:// prefix")
    uris, keys = registered_files(store)
    manifests = plan_new_shards(
        list_source_files(shard_source.uri, shard_source.source_name),
        registered_uris=uris,
        existing_keys=keys,
        prefix=shard_source.source_name,
        files_per_shard=shard_source.files_per_shard,
        max_new_shards=shard_source.max_new_shards_per_tick,
    )
    if not manifests:
        return SkipReason(f"no new files under {shard_source.uri}")
    for manifest in manifests:
        storage.write_bytes(manifest.to_json().encode(), store.manifest_uri(manifest.key))
    new_keys = [m.key for m in manifests]
    context.log.info(f"registering {len(new_keys)} shard groups: {new_keys[0]}..{new_keys[-1]}")
    return SensorResult(
        dynamic_partitions_requests=[shard_partitions.build_add_request(new_keys)],
        run_requests=[RunRequest(run_key=f"ingest-{k}", partition_key=k) for k in new_keys],
    )
