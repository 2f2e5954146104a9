"""``raw_shards[shard]``: the raw documents of one shard group, read from its manifest's files
(library: :mod:`pretrain.data`; settings ``--raw.*``, ``RawShardConfig``)."""

from foundation.assets import ERROR, Made, StageRun, stage_asset
from foundation.metadata import cpu_seconds
from foundation.partitions import shard_partitions
from pretrain import storage, verify
from pretrain.data.raw import ShardManifest, build_raw_shard


@stage_asset(
    "raw_shards",
    stage="raw",
    partitions=shard_partitions,
    deps={},
    code_version="raw-v2",  # v2: source_id + metadata
    group="data",
    checks={"non_empty": ERROR, "documents_plus_rejects_equal_records_read": ERROR},
)
def raw_shards(run: StageRun) -> Made:
    """Raw documents of one shard group, read from the files listed in its manifest."""
    shard, config = run.partition or "", run.library()
    manifest = ShardManifest.from_json(storage.read_bytes(run.store.manifest_uri(shard)).decode())
    out = run.uri("raw_shards", shard)
    ident = run.begin(out, {"config": config, "manifest": manifest.to_json()}, inputs=[])
    with cpu_seconds() as cpu:
        stats = build_raw_shard(manifest, out, max_docs=config.max_docs, extract=config.extract)
    return run.made(out, ident, stats, config, cpu_seconds=cpu["seconds"], checks={
        "non_empty": verify.non_empty(storage.join(out, "documents.parquet")),
        "documents_plus_rejects_equal_records_read": verify.manifest_reconciles(out),
    })  # fmt: skip
