"""``shard_discovery_sensor``: new raw files → new ``shards`` partitions → ``ingest`` runs.

A local source whose folders have the modification times the cursor holds has no new file:
the tick ends after one ``stat`` per folder (:class:`pretrain.data.discovery.FolderStamp`),
without listing the files. An ``s3://`` source with no object after the last one listed (one
request) ends there too; it is listed whole at least hourly, for a file whose name sorts
before the last (:func:`pretrain.data.discovery.unchanged_since`). Otherwise it lists the
``ShardSource`` folder or ``s3://`` prefix; when the listing is the one the cursor names (a
digest of its file names), nothing has arrived: the tick ends there, without reading the
artifact store. Otherwise it plans shard groups for the files no manifest holds yet (pure:
:func:`pretrain.data.discovery.plan_new_shards`), against the index of registered files kept
next to the manifests (:class:`pretrain.data.discovery.RegisteredFiles`: one read, plus the
manifests another path wrote since, not every manifest of the campaign), writes the new
manifests and the index, adds the partitions and requests an ``ingest`` run for each. Run keys
are the shard keys, so a replayed tick never ingests a shard twice. A tick that hit
``max_new_shards_per_tick`` keeps the old cursor, so the next tick registers the rest.
"""

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from foundation.partitions import shard_partitions
from foundation.stages import job_name
from pretrain import storage
from pretrain.data.discovery import (
    FolderStamp,
    RegisteredFiles,
    cursor_digest,
    discovery_cursor,
    listing_digest,
    plan_new_shards,
    unchanged_since,
)
from pretrain.data.raw import list_source_files
from resources.sources import ShardSource
from resources.storage import ArtifactStore


@sensor(
    job_name=job_name("raw_shards"),
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.STOPPED,
)
def shard_discovery_sensor(
    context: SensorEvaluationContext, store: ArtifactStore, shard_source: ShardSource
):
    if not shard_source.uri:
        return SkipReason("no ShardSource.uri configured: set it to a folder or s3:// prefix")
    if unchanged_since(context.cursor, shard_source.uri):
        return SkipReason(f"no new files under {shard_source.uri} (unchanged since the last look)")
    stamp = FolderStamp.take(shard_source.uri)  # before the listing: a file during it moves it
    files = list_source_files(shard_source.uri, shard_source.source_name)
    digest = listing_digest(files)
    if digest == cursor_digest(context.cursor):  # the same files: keep the newer stamp
        looked = discovery_cursor(digest, stamp, shard_source.uri, files)
        skip = f"no new files under {shard_source.uri}"
        return (
            SkipReason(skip)
            if looked == context.cursor
            else SensorResult(skip_reason=skip, cursor=looked)
        )
    registered = RegisteredFiles.load(store.uri("manifests"))
    manifests = plan_new_shards(
        files,
        registered_uris=registered,
        existing_keys=registered.keys,
        prefix=shard_source.source_name,
        files_per_shard=shard_source.files_per_shard,
        max_new_shards=shard_source.max_new_shards_per_tick,
    )
    capped = len(manifests) >= shard_source.max_new_shards_per_tick  # more to come next tick
    cursor = context.cursor if capped else discovery_cursor(digest, stamp, shard_source.uri, files)
    if not manifests:
        return SensorResult(skip_reason=f"no new files under {shard_source.uri}", cursor=cursor)
    for manifest in manifests:
        storage.write_bytes(manifest.to_json().encode(), store.manifest_uri(manifest.key))
    registered.add(manifests)
    registered.save(store.uri("manifests"))
    new_keys = [m.key for m in manifests]
    context.log.info(f"registering {len(new_keys)} shard groups: {new_keys[0]}..{new_keys[-1]}")
    return SensorResult(
        dynamic_partitions_requests=[shard_partitions.build_add_request(new_keys)],
        run_requests=[RunRequest(run_key=f"ingest-{k}", partition_key=k) for k in new_keys],
        cursor=cursor,
    )
