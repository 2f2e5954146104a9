"""Per-shard data assets: ``raw_shards[shard]`` → ``filtered_shards[shard]``.

Each asset reads its partition's URIs from the ``ArtifactStore``, calls one library
function, and returns its stats plus asset-check results recomputed from the files.
"""

from dagster import AssetCheckSpec, AssetExecutionContext, Config, MaterializeResult, asset

from pretrain import storage, verify
from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.filters.heuristics import HeuristicConfig
from pretrain.filters.langid import LangIdConfig
from pretrain.filters.pipeline import FilterConfig, filter_shard
from pretrain_assets.metadata import check_result, stage_metadata
from pretrain_assets.partitions import shard_partitions
from resources.storage import ArtifactStore


class RawShardsConfig(Config):
    max_docs_per_shard: int | None = None


@asset(
    partitions_def=shard_partitions,
    group_name="data",
    code_version="raw-v1",
    check_specs=[
        AssetCheckSpec("non_empty", asset="raw_shards"),
        AssetCheckSpec("documents_plus_rejects_equal_records_read", asset="raw_shards"),
    ],
)
def raw_shards(
    context: AssetExecutionContext, config: RawShardsConfig, store: ArtifactStore
) -> MaterializeResult:
    """Raw documents of one shard group, read from the files listed in its manifest."""
    shard = context.partition_key
    manifest = ShardManifest.from_json(storage.read_bytes(store.manifest_uri(shard)).decode())
    out = store.uri("raw_shards", shard)
    stats = build_raw_shard(manifest, out, max_docs=config.max_docs_per_shard)
    return MaterializeResult(
        metadata=stage_metadata(stats, config.model_dump(), uri=out),
        check_results=[
            check_result("non_empty", verify.non_empty(storage.join(out, "documents.parquet"))),
            check_result(
                "documents_plus_rejects_equal_records_read", verify.manifest_reconciles(out)
            ),
        ],
    )


class FilterAssetConfig(Config):
    languages: list[str] | None = None
    min_language_score: float = 0.65
    min_chars: int = 50
    min_words: int = 50


def filter_config(config: FilterAssetConfig) -> FilterConfig:
    languages = tuple(config.languages) if config.languages else None
    return FilterConfig(
        langid=LangIdConfig(languages=languages, min_score=config.min_language_score),
        heuristics=HeuristicConfig(min_chars=config.min_chars, min_words=config.min_words),
    )


@asset(
    partitions_def=shard_partitions,
    deps=[raw_shards],
    group_name="data",
    code_version="filter-v1",
    check_specs=[
        AssetCheckSpec("non_empty", asset="filtered_shards"),
        AssetCheckSpec("kept_plus_rejected_equals_input", asset="filtered_shards"),
    ],
)
def filtered_shards(
    context: AssetExecutionContext, config: FilterAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """NFKC-normalized, language-identified, heuristically filtered documents + rejects."""
    shard = context.partition_key
    raw_uri = store.uri("raw_shards", shard, "documents.parquet")
    out = store.uri("filtered_shards", shard)
    library_config = filter_config(config)
    stats = filter_shard(raw_uri, out, library_config)
    kept, rejects = storage.join(out, "documents.parquet"), storage.join(out, "rejects.parquet")
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out),
        check_results=[
            check_result("non_empty", verify.non_empty(kept)),
            check_result(
                "kept_plus_rejected_equals_input", verify.reconciles(raw_uri, [kept, rejects])
            ),
        ],
    )
