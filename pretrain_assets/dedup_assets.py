"""Dedup assets: ``minhash_signatures[shard]`` → ``dedup_pairs[band-slice]`` →
``dedup_clusters`` → ``deduped_shards[shard]``.

``dedup_pairs`` fans out over static band partitions (one run each, any executor: in
process, multiprocess, or a Ray cluster); ``dedup_clusters`` only joins the verified pairs.
"""

from typing import TYPE_CHECKING, Any

from dagster import (
    AllPartitionMapping,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    MaterializeResult,
    asset,
)

from jobs.config import to_library
from jobs.partitions import SHARD_PARTITIONS_NAME, band_partitions, check_band_layout
from jobs.stages import STAGES
from pretrain import storage, verify
from pretrain.checks import count_rows
from pretrain.dedup.apply import apply_dedup
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import compute_signatures
from pretrain.dedup.pairs import band_pairs, check_pairs, cluster_band_pairs
from pretrain.filters.funnel import aggregate, funnel_markdown, stats_from_json
from pretrain_assets.metadata import (
    begin_output,
    check_result,
    cpu_seconds,
    finish_output,
    stage_metadata,
)
from pretrain_assets.per_shard import ShardOutput, own_group, shard_asset
from pretrain_assets.step_resources import STEP_RESOURCES, STEP_RETRY, bad_input_not_retried
from resources.storage import ArtifactStore

# one launch config for both stages: signatures and clusters must run with the same values
if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    DedupRunConfig = Any
else:
    DedupRunConfig = STAGES["dedup"].config_class


@shard_asset(
    "minhash_signatures",
    deps={"filtered_shards": True},
    code_version="minhash-v2",
    checks={"one_signature_per_document": False},
    config=DedupRunConfig,
    group="dedup",
)
def minhash_signatures(
    context: AssetExecutionContext, shard: str, store: ArtifactStore, config: DedupRunConfig
) -> ShardOutput:
    """MinHash signatures, band-bucket rows and line hashes of one shard's kept documents."""
    docs_uri = store.uri("filtered_shards", shard, "documents.parquet")
    out_dir = store.uri("minhash_signatures", shard)
    out = storage.join(out_dir, "signatures.parquet")
    library_config = check_band_layout(to_library(config, DedupConfig))
    inputs = [store.uri("filtered_shards", shard)]
    ident = begin_output(context, store, out_dir, library_config, inputs, partition=shard)
    with cpu_seconds() as cpu:
        stats = compute_signatures(docs_uri, out, library_config)
    return ShardOutput(
        data_version=finish_output(out_dir, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out, cpu_seconds=cpu["seconds"]),
        checks={"one_signature_per_document": verify.same_rows(docs_uri, out)},
    )


@asset(
    partitions_def=band_partitions,
    deps=[AssetDep("minhash_signatures", partition_mapping=AllPartitionMapping())],
    group_name="dedup",
    code_version="pairs-v1",
    check_specs=[AssetCheckSpec("pairs_ordered_inside_corpus", asset="dedup_pairs")],
    op_tags=STEP_RESOURCES["dedup_pairs"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
def dedup_pairs(
    context: AssetExecutionContext, config: DedupRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Verified duplicate pairs of one band x hash slice, read from every shard's buckets."""
    key = context.partition_key
    out_dir = store.uri("dedup_pairs", key)
    out = storage.join(out_dir, "pairs.parquet")
    library_config = check_band_layout(to_library(config, DedupConfig))
    shards = context.instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME)
    inputs = [store.uri("minhash_signatures", s) for s in shards]
    signatures = [storage.join(uri, "signatures.parquet") for uri in inputs]
    ident = begin_output(context, store, out_dir, library_config, inputs)
    stats = band_pairs(signatures, store.uri("dedup_clusters"), out, key, library_config)
    # the node numbers span every shard's signature rows
    documents = sum(count_rows(uri) for uri in signatures)
    return MaterializeResult(
        data_version=finish_output(out_dir, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out),
        check_results=[check_result("pairs_ordered_inside_corpus", check_pairs(out, documents))],
    )


@asset(
    deps=["minhash_signatures", dedup_pairs],
    group_name="dedup",
    code_version="clusters-v3",
    check_specs=[AssetCheckSpec("duplicate_rate_in_range", asset="dedup_clusters")],
    op_tags=STEP_RESOURCES["dedup_clusters"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
def dedup_clusters(
    context: AssetExecutionContext, config: DedupRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Union of every band partition's pairs, survivors (incremental), boilerplate lines."""
    shards = context.instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME)
    signature_uris = [store.uri("minhash_signatures", s, "signatures.parquet") for s in shards]
    out = store.uri("dedup_clusters")
    library_config = check_band_layout(to_library(config, DedupConfig))
    inputs = [store.uri("minhash_signatures", s) for s in shards]
    ident = begin_output(context, store, out, library_config, inputs)
    stats = cluster_band_pairs(signature_uris, store.uri("dedup_pairs"), out, library_config)
    outcome = verify.rate_in_range(
        stats.removed, stats.documents, 0.0, library_config.max_duplicate_rate
    )
    every_shard = [store.uri("filtered_shards", s, "stats.json") for s in shards]
    funnel = aggregate([stats_from_json(storage.read_json(u)) for u in every_shard])
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(
            stats,
            library_config,
            ident,
            uri=out,
            shards=len(shards),
            funnel_all_shards_md=funnel_markdown(funnel),
        ),  # fmt: skip
        check_results=[check_result("duplicate_rate_in_range", outcome, warn=True)],
    )


@shard_asset(
    "deduped_shards",
    deps={"filtered_shards": True, "dedup_clusters": False},
    code_version="dedup-apply-v3",  # v3: provenance columns pass through
    checks={"non_empty": False, "kept_plus_rejected_equals_input": False},
    group="dedup",
)
def deduped_shards(
    context: AssetExecutionContext, shard: str, store: ArtifactStore, _: None
) -> ShardOutput:
    """One shard minus non-survivors and boilerplate lines (removals in rejects, with reason)."""
    docs_uri = store.uri("filtered_shards", shard, "documents.parquet")
    out = store.uri("deduped_shards", shard)
    inputs = [store.uri("filtered_shards", shard), store.uri("dedup_clusters")]
    ident = begin_output(context, store, out, {"shard": shard}, inputs, partition=shard,
                         look=own_group(store, shard))  # fmt: skip
    with cpu_seconds() as cpu:
        stats = apply_dedup(docs_uri, store.uri("dedup_clusters", "clusters.parquet"), out)
    kept, rejects = storage.join(out, "documents.parquet"), storage.join(out, "rejects.parquet")
    return ShardOutput(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(
            stats, {"shard": shard}, ident, uri=out, cpu_seconds=cpu["seconds"]
        ),
        checks={
            "non_empty": verify.non_empty(kept),
            "kept_plus_rejected_equals_input": verify.reconciles(docs_uri, [kept, rejects]),
        },
    )
