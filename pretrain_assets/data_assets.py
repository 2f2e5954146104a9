"""Per-shard data assets: ``raw_shards[shard]`` → (``quality_classifier``, ``toxicity_classifier``)
→ ``filtered_shards[shard]``.

Each asset reads a shard group's URIs from the ``ArtifactStore``, calls one library
function, and returns its stats plus asset-check results recomputed from the files (one run
makes one group or a batch: :mod:`pretrain_assets.per_shard`). ``filtered_shards`` reports the
funnel (Markdown) of its shard; ``dedup_clusters`` the funnel of every shard.
"""

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dagster import AssetExecutionContext

from jobs.config import to_library
from jobs.stages import STAGES
from pretrain import identity, storage, verify
from pretrain.data.config import RawShardConfig
from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.filters.config import FilterConfig
from pretrain.filters.funnel import drop_rates_within, funnel_reconciles
from pretrain.filters.pipeline import filter_shard
from pretrain.filters.toxicity_model import VERSION as TOXICITY_MODEL_VERSION
from pretrain_assets.metadata import begin_output, cpu_seconds, finish_output, stage_metadata
from pretrain_assets.per_shard import ShardOutput, shard_asset
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    RawShardsConfig = Any
else:
    RawShardsConfig = STAGES["raw"].config_class


@shard_asset(
    "raw_shards",
    deps={},
    code_version="raw-v2",  # v2: source_id + metadata
    checks={"non_empty": False, "documents_plus_rejects_equal_records_read": False},
    config=RawShardsConfig,
)
def raw_shards(
    context: AssetExecutionContext, shard: str, store: ArtifactStore, config: RawShardsConfig
) -> ShardOutput:
    """Raw documents of one shard group, read from the files listed in its manifest."""
    manifest = ShardManifest.from_json(storage.read_bytes(store.manifest_uri(shard)).decode())
    out = store.uri("raw_shards", shard)
    library_config = to_library(config, RawShardConfig)
    settings = {"config": library_config, "manifest": manifest.to_json()}
    ident = begin_output(context, store, out, settings, inputs=[], partition=shard)
    with cpu_seconds() as cpu:
        stats = build_raw_shard(
            manifest, out, max_docs=library_config.max_docs, extract=library_config.extract
        )
    return ShardOutput(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out, cpu_seconds=cpu["seconds"]),
        checks={
            "non_empty": verify.non_empty(storage.join(out, "documents.parquet")),
            "documents_plus_rejects_equal_records_read": verify.manifest_reconciles(out),
        },
    )


if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    FilterRunConfig = Any
else:
    FilterRunConfig = STAGES["filter"].config_class


def filter_code_version(toxicity_model: str = TOXICITY_MODEL_VERSION) -> str:
    """The filter stage's code version: its rules' version and the shipped toxicity model's,
    so a new model makes every filtered shard stale (the backfill schedule redoes them)."""
    return f"filter-v4+{toxicity_model}"  # v4: the shipped toxicity model, unscored languages


@shard_asset(
    "filtered_shards",
    deps={"raw_shards": True, "quality_classifier": False, "toxicity_classifier": False},
    code_version=filter_code_version(),
    checks={
        "non_empty": False,
        "kept_plus_rejected_equals_input": False,
        "drop_rate_per_reason_within_bounds": True,
    },
    config=FilterRunConfig,
)
def filtered_shards(
    context: AssetExecutionContext, shard: str, store: ArtifactStore, config: FilterRunConfig
) -> ShardOutput:
    """Cleaned, language-identified, rule-filtered, PII-masked documents + rejects + funnel."""
    raw_uri = store.uri("raw_shards", shard, "documents.parquet")
    out = store.uri("filtered_shards", shard)
    model_uri = store.uri("quality_classifier") if config.use_quality_classifier else None
    library_config = to_library(config, FilterConfig, quality_model_uri=model_uri)
    classifier_uri = store.uri("toxicity_classifier")
    toxicity_uri: str | None = classifier_uri
    if library_config.toxicity is None or identity.read(classifier_uri) is None:
        toxicity_uri = None  # rule family off (null), or never materialized: goes on without
    else:
        toxicity = replace(library_config.toxicity, classifier_uri=classifier_uri)
        library_config = replace(library_config, toxicity=toxicity)
    inputs = [store.uri("raw_shards", shard), *(u for u in (model_uri, toxicity_uri) if u)]
    ident = begin_output(context, store, out, library_config, inputs, partition=shard)
    with cpu_seconds() as cpu:
        stats = filter_shard(raw_uri, out, library_config)
    return ShardOutput(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out, cpu_seconds=cpu["seconds"]),
        checks={
            "non_empty": verify.non_empty(storage.join(out, "documents.parquet")),
            "kept_plus_rejected_equals_input": funnel_reconciles(raw_uri, out),
            "drop_rate_per_reason_within_bounds": drop_rates_within(
                stats, library_config.max_drop_rate_per_reason
            ),
        },
    )
