"""Dedup (library: :mod:`pretrain.dedup`; settings ``--dedup.*``, ``DedupConfig``, one config for
every dedup asset: signatures and clusters must agree):

    minhash_signatures[shard] ─▶ dedup_pairs[band-slice] ─▶ dedup_clusters ─▶ deduped_shards[shard]

``dedup_pairs`` fans out over static band partitions (one run each, any executor);
``dedup_clusters`` joins the verified pairs and reports the funnel of every shard.
"""

from dagster import AllPartitionMapping, AssetDep

from foundation.assets import ERROR, WARN, Made, StageRun, stage_asset
from foundation.metadata import cpu_seconds
from foundation.partitions import (
    SHARD_PARTITIONS_NAME,
    band_partitions,
    check_band_layout,
    shard_partitions,
)
from foundation.per_shard import own_group
from pretrain import storage, verify
from pretrain.checks import count_rows
from pretrain.dedup.apply import apply_dedup
from pretrain.dedup.minhash import compute_signatures
from pretrain.dedup.pairs import band_pairs, check_pairs, cluster_band_pairs
from pretrain.filters.funnel import aggregate, funnel_markdown, stats_from_json


@stage_asset(
    "minhash_signatures",
    stage="dedup",
    partitions=shard_partitions,
    deps={"filtered_shards": True},
    code_version="minhash-v2",
    group="dedup",
    checks={"one_signature_per_document": ERROR},
)
def minhash_signatures(run: StageRun) -> Made:
    """MinHash signatures, band-bucket rows and line hashes of one shard's kept documents."""
    shard = run.partition or ""
    docs = run.uri("filtered_shards", shard, "documents.parquet")
    out_dir = run.uri("minhash_signatures", shard)
    out, config = storage.join(out_dir, "signatures.parquet"), check_band_layout(run.library())
    ident = run.begin(out_dir, config, [run.uri("filtered_shards", shard)])
    with cpu_seconds() as cpu:
        stats = compute_signatures(docs, out, config)
    return run.made(out_dir, ident, stats, config, uri=out, cpu_seconds=cpu["seconds"],
                    checks={"one_signature_per_document": verify.same_rows(docs, out)})  # fmt: skip


@stage_asset(
    "dedup_pairs",
    stage="dedup",
    partitions=band_partitions,
    deps=[AssetDep("minhash_signatures", partition_mapping=AllPartitionMapping())],
    code_version="pairs-v1",
    group="dedup",
    checks={"pairs_ordered_inside_corpus": ERROR},
    retried=True,
)
def dedup_pairs(run: StageRun) -> Made:
    """Verified duplicate pairs of one band x hash slice, read from every shard's buckets."""
    key, config = run.partition or "", check_band_layout(run.library())
    out_dir = run.uri("dedup_pairs", key)
    out = storage.join(out_dir, "pairs.parquet")
    inputs = [run.uri("minhash_signatures", s) for s in _shards(run)]
    signatures = [storage.join(uri, "signatures.parquet") for uri in inputs]
    ident = run.begin(out_dir, config, inputs)
    stats = band_pairs(signatures, run.uri("dedup_clusters"), out, key, config)
    documents = sum(count_rows(uri) for uri in signatures)  # node numbers span every shard
    return run.made(out_dir, ident, stats, config, uri=out,
                    checks={"pairs_ordered_inside_corpus": check_pairs(out, documents)})  # fmt: skip


@stage_asset(
    "dedup_clusters",
    stage="dedup",
    deps=["minhash_signatures", "dedup_pairs"],
    code_version="clusters-v3",
    group="dedup",
    checks={"duplicate_rate_in_range": WARN},
    retried=True,
)
def dedup_clusters(run: StageRun) -> Made:
    """Union of every band partition's pairs, survivors (incremental), boilerplate lines."""
    shards, config, out = _shards(run), check_band_layout(run.library()), run.uri("dedup_clusters")
    ident = run.begin(out, config, [run.uri("minhash_signatures", s) for s in shards])
    signatures = [run.uri("minhash_signatures", s, "signatures.parquet") for s in shards]
    stats = cluster_band_pairs(signatures, run.uri("dedup_pairs"), out, config)
    funnel = aggregate([stats_from_json(storage.read_json(run.uri("filtered_shards", s,
                                                                  "stats.json"))) for s in shards])  # fmt: skip
    rate = verify.rate_in_range(stats.removed, stats.documents, 0.0, config.max_duplicate_rate)
    return run.made(out, ident, stats, config, shards=len(shards),
                    funnel_all_shards_md=funnel_markdown(funnel),
                    checks={"duplicate_rate_in_range": rate})  # fmt: skip


@stage_asset(
    "deduped_shards",
    partitions=shard_partitions,
    deps={"filtered_shards": True, "dedup_clusters": False},
    code_version="dedup-apply-v3",  # v3: provenance columns pass through
    group="dedup",
    checks={"non_empty": ERROR, "kept_plus_rejected_equals_input": ERROR},
)
def deduped_shards(run: StageRun) -> Made:
    """One shard minus non-survivors and boilerplate lines (removals in rejects, with reason)."""
    shard = run.partition or ""
    docs, out = (
        run.uri("filtered_shards", shard, "documents.parquet"),
        run.uri("deduped_shards", shard),
    )
    inputs = [run.uri("filtered_shards", shard), run.uri("dedup_clusters")]
    ident = run.begin(out, {"shard": shard}, inputs, look=own_group(run.store, shard))
    with cpu_seconds() as cpu:
        stats = apply_dedup(docs, run.uri("dedup_clusters", "clusters.parquet"), out)
    kept, rejects = storage.join(out, "documents.parquet"), storage.join(out, "rejects.parquet")
    return run.made(out, ident, stats, {"shard": shard}, cpu_seconds=cpu["seconds"], checks={
        "non_empty": verify.non_empty(kept),
        "kept_plus_rejected_equals_input": verify.reconciles(docs, [kept, rejects]),
    })  # fmt: skip


def _shards(run: StageRun) -> list[str]:
    return list(run.context.instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME))
