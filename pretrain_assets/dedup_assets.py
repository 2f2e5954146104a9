"""Dedup assets: ``minhash_signatures[shard]`` → ``dedup_pairs[band-slice]`` →
``dedup_clusters`` → ``deduped_shards[shard]``.

``dedup_pairs`` fans out over static band partitions (one run each, any executor: in
process, multiprocess, or a Ray cluster); ``dedup_clusters`` only joins the verified pairs.
"""

from dagster import (
    AllPartitionMapping,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    Config,
    MaterializeResult,
    asset,
)

from pretrain import storage, verify
from pretrain.dedup.apply import apply_dedup
from pretrain.dedup.config import DedupConfig, LineDedupConfig
from pretrain.dedup.minhash import compute_signatures
from pretrain.dedup.pairs import band_pairs, check_pairs, cluster_band_pairs
from pretrain_assets.data_assets import filtered_shards
from pretrain_assets.metadata import check_result, stage_metadata
from pretrain_assets.partitions import band_partitions, shard_partitions
from pretrain_assets.step_resources import STEP_RESOURCES, STEP_RETRY, bad_input_not_retried
from resources.storage import ArtifactStore


class DedupAssetConfig(Config):
    """Launch-time dedup settings; signatures and clusters must run with the same values."""

    threshold: float = 0.8
    num_perm: int = 112
    bands: int = 14
    rows: int = 8
    ngram: int = 5
    verify: str = "jaccard"
    url_dedup: bool = True
    incremental: bool = True
    max_partition_rows: int = 2_000_000
    line_min_documents: int = 20  # 0 switches line dedup off
    line_unit: str = "line"
    max_duplicate_rate: float = 0.6


def dedup_config(config: DedupAssetConfig) -> DedupConfig:
    return DedupConfig(
        threshold=config.threshold,
        num_perm=config.num_perm,
        bands=config.bands,
        rows=config.rows,
        ngram=config.ngram,
        verify=config.verify,
        url_dedup=config.url_dedup,
        incremental=config.incremental,
        max_partition_rows=config.max_partition_rows,
        lines=LineDedupConfig(min_documents=config.line_min_documents, unit=config.line_unit),
    )


@asset(
    partitions_def=shard_partitions,
    deps=[filtered_shards],
    group_name="dedup",
    code_version="minhash-v2",
    check_specs=[AssetCheckSpec("one_signature_per_document", asset="minhash_signatures")],
    op_tags=STEP_RESOURCES["minhash_signatures"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
def minhash_signatures(
    context: AssetExecutionContext, config: DedupAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """MinHash signatures, band-bucket rows and line hashes of one shard's kept documents."""
    shard = context.partition_key
    docs_uri = store.uri("filtered_shards", shard, "documents.parquet")
    out = store.uri("minhash_signatures", shard, "signatures.parquet")
    library_config = dedup_config(config)
    stats = compute_signatures(docs_uri, out, library_config)
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out),
        check_results=[check_result("one_signature_per_document", verify.same_rows(docs_uri, out))],
    )


def _signature_uris(context: AssetExecutionContext, store: ArtifactStore) -> list[str]:
    shards = context.instance.get_dynamic_partitions(shard_partitions.name)
    return [store.uri("minhash_signatures", s, "signatures.parquet") for s in shards]


@asset(
    partitions_def=band_partitions,
    deps=[AssetDep(minhash_signatures, partition_mapping=AllPartitionMapping())],
    group_name="dedup",
    code_version="pairs-v1",
    check_specs=[AssetCheckSpec("pairs_ordered_inside_corpus", asset="dedup_pairs")],
    op_tags=STEP_RESOURCES["dedup_pairs"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
def dedup_pairs(
    context: AssetExecutionContext, config: DedupAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """Verified duplicate pairs of one band x hash slice, read from every shard's buckets."""
    key = context.partition_key
    out = store.uri("dedup_pairs", key, "pairs.parquet")
    library_config = dedup_config(config)
    stats = band_pairs(
        _signature_uris(context, store), store.uri("dedup_clusters"), out, key, library_config
    )
    documents = sum(
        verify.count_rows(uri) for uri in _signature_uris(context, store)
    )  # the node numbers span every shard's signature rows
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out),
        check_results=[check_result("pairs_ordered_inside_corpus", check_pairs(out, documents))],
    )


@asset(
    deps=[minhash_signatures, dedup_pairs],
    group_name="dedup",
    code_version="clusters-v3",
    check_specs=[AssetCheckSpec("duplicate_rate_in_range", asset="dedup_clusters")],
    op_tags=STEP_RESOURCES["dedup_clusters"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
def dedup_clusters(
    context: AssetExecutionContext, config: DedupAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """Union of every band partition's pairs, survivors (incremental), boilerplate lines."""
    signature_uris = _signature_uris(context, store)
    out = store.uri("dedup_clusters")
    library_config = dedup_config(config)
    stats = cluster_band_pairs(signature_uris, store.uri("dedup_pairs"), out, library_config)
    outcome = verify.rate_in_range(stats.removed, stats.documents, 0.0, config.max_duplicate_rate)
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out, shards=len(signature_uris)),
        check_results=[check_result("duplicate_rate_in_range", outcome, warn=True)],
    )


@asset(
    partitions_def=shard_partitions,
    deps=[filtered_shards, dedup_clusters],
    group_name="dedup",
    code_version="dedup-apply-v2",
    check_specs=[
        AssetCheckSpec("non_empty", asset="deduped_shards"),
        AssetCheckSpec("kept_plus_rejected_equals_input", asset="deduped_shards"),
    ],
    op_tags=STEP_RESOURCES["deduped_shards"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
def deduped_shards(context: AssetExecutionContext, store: ArtifactStore) -> MaterializeResult:
    """One shard minus non-survivors and boilerplate lines (removals in rejects, with reason)."""
    shard = context.partition_key
    docs_uri = store.uri("filtered_shards", shard, "documents.parquet")
    out = store.uri("deduped_shards", shard)
    stats = apply_dedup(docs_uri, store.uri("dedup_clusters", "clusters.parquet"), out)
    kept, rejects = storage.join(out, "documents.parquet"), storage.join(out, "rejects.parquet")
    return MaterializeResult(
        metadata=stage_metadata(stats, {"shard": shard}, uri=out),
        check_results=[
            check_result("non_empty", verify.non_empty(kept)),
            check_result(
                "kept_plus_rejected_equals_input", verify.reconciles(docs_uri, [kept, rejects])
            ),
        ],
    )
