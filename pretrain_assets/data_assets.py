"""Per-shard data assets: ``raw_shards[shard]`` → (``quality_classifier``) → ``filtered_shards[shard]``.

Each asset reads its partition's URIs from the ``ArtifactStore``, calls one library
function, and returns its stats plus asset-check results recomputed from the files.
``filtered_shards`` also reports the funnel (Markdown) of its shard and of every shard
filtered so far.
"""

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    Config,
    MaterializeResult,
    asset,
)

from pretrain import storage, verify
from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.filters.funnel import (
    aggregate,
    drop_rates_within,
    funnel_markdown,
    funnel_reconciles,
    stats_from_json,
)
from pretrain.filters.heuristics import HeuristicConfig
from pretrain.filters.langid import LangIdConfig
from pretrain.filters.pipeline import FilterConfig, filter_shard
from pretrain.filters.toxicity import ToxicityConfig
from pretrain.filters.urls import UrlConfig
from pretrain_assets.metadata import check_result, stage_metadata
from pretrain_assets.partitions import shard_partitions
from pretrain_assets.step_resources import STEP_RESOURCES, STEP_RETRY, bad_input_not_retried
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
    op_tags=STEP_RESOURCES["raw_shards"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
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
    language_thresholds: dict[str, float] = {}
    min_chars: int = 50
    url_blocklist: list[str] = []
    url_blocklist_uri: str | None = None
    toxicity_word_lists_uri: str | None = None
    use_quality_classifier: bool = True
    min_quality_score: float | None = None
    keep_top_fraction: float | None = None
    max_drop_rate_per_reason: float = 0.5  # warn above this share of the input


def filter_config(config: FilterAssetConfig, quality_model_uri: str | None) -> FilterConfig:
    languages = tuple(config.languages) if config.languages else None
    return FilterConfig(
        langid=LangIdConfig(
            languages=languages,
            min_score=config.min_language_score,
            language_thresholds=dict(config.language_thresholds),
        ),
        heuristics=HeuristicConfig(min_chars=config.min_chars),
        urls=UrlConfig(
            blocklist=tuple(config.url_blocklist), blocklist_uri=config.url_blocklist_uri
        ),
        toxicity=ToxicityConfig(word_lists_uri=config.toxicity_word_lists_uri),
        quality_model_uri=quality_model_uri if config.use_quality_classifier else None,
        min_quality_score=config.min_quality_score,
        keep_top_fraction=config.keep_top_fraction,
    )


@asset(
    partitions_def=shard_partitions,
    deps=[raw_shards, AssetKey("quality_classifier")],
    group_name="data",
    code_version="filter-v2",
    check_specs=[
        AssetCheckSpec("non_empty", asset="filtered_shards"),
        AssetCheckSpec("kept_plus_rejected_equals_input", asset="filtered_shards"),
        AssetCheckSpec("drop_rate_per_reason_within_bounds", asset="filtered_shards"),
    ],
    op_tags=STEP_RESOURCES["filtered_shards"],
    retry_policy=STEP_RETRY,
)
@bad_input_not_retried
def filtered_shards(
    context: AssetExecutionContext, config: FilterAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """Cleaned, language-identified, rule-filtered, PII-masked documents + rejects + funnel."""
    shard = context.partition_key
    raw_uri = store.uri("raw_shards", shard, "documents.parquet")
    out = store.uri("filtered_shards", shard)
    library_config = filter_config(config, store.uri("quality_classifier"))
    stats = filter_shard(raw_uri, out, library_config)
    every_shard = storage.list_files(store.uri("filtered_shards"), suffixes=("stats.json",))
    overall = aggregate([stats_from_json(storage.read_json(u)) for u in every_shard])
    return MaterializeResult(
        metadata=stage_metadata(
            stats, library_config, uri=out, funnel_all_shards_md=funnel_markdown(overall)
        ),
        check_results=[
            check_result("non_empty", verify.non_empty(storage.join(out, "documents.parquet"))),
            check_result("kept_plus_rejected_equals_input", funnel_reconciles(raw_uri, out)),
            check_result(
                "drop_rate_per_reason_within_bounds",
                drop_rates_within(stats, config.max_drop_rate_per_reason),
                warn=True,
            ),
        ],
    )
