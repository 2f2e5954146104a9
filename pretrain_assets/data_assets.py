"""Per-shard data assets: ``raw_shards[shard]`` → (``quality_classifier``, ``toxicity_classifier``)
→ ``filtered_shards[shard]``.

Each asset reads its partition's URIs from the ``ArtifactStore``, calls one library
function, and returns its stats plus asset-check results recomputed from the files.
``filtered_shards`` also reports the funnel (Markdown) of its shard and of every shard
filtered so far.
"""

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    MaterializeResult,
    asset,
)

from jobs.config import to_library
from jobs.partitions import shard_partitions
from jobs.stages import STAGES
from pretrain import identity, storage, verify
from pretrain.data.config import RawShardConfig
from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.filters.config import FilterConfig
from pretrain.filters.funnel import (
    aggregate,
    drop_rates_within,
    funnel_markdown,
    funnel_reconciles,
    stats_from_json,
)
from pretrain.filters.pipeline import filter_shard
from pretrain.filters.toxicity_model import VERSION as TOXICITY_MODEL_VERSION
from pretrain_assets.metadata import (
    begin_output,
    check_result,
    cpu_seconds,
    finish_output,
    stage_metadata,
)
from pretrain_assets.step_resources import STEP_RESOURCES, STEP_RETRY, bad_input_not_retried
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    RawShardsConfig = Any
else:
    RawShardsConfig = STAGES["raw"].config_class


@asset(
    partitions_def=shard_partitions,
    group_name="data",
    code_version="raw-v2",  # v2: source_id + metadata
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
    library_config = to_library(config, RawShardConfig)
    settings = {"config": library_config, "manifest": manifest.to_json()}
    ident = begin_output(context, store, out, settings, inputs=[])
    with cpu_seconds() as cpu:
        stats = build_raw_shard(
            manifest, out, max_docs=library_config.max_docs, extract=library_config.extract
        )
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out, cpu_seconds=cpu["seconds"]),
        check_results=[
            check_result("non_empty", verify.non_empty(storage.join(out, "documents.parquet"))),
            check_result(
                "documents_plus_rejects_equal_records_read", verify.manifest_reconciles(out)
            ),
        ],
    )


if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    FilterRunConfig = Any
else:
    FilterRunConfig = STAGES["filter"].config_class


def filter_code_version(toxicity_model: str = TOXICITY_MODEL_VERSION) -> str:
    """The filter stage's code version: its rules' version and the shipped toxicity model's,
    so a new model makes every filtered shard stale (the backfill schedule redoes them)."""
    # v5: the toxicity rule reads a model only on sentences of its languages, no document model
    return f"filter-v5+{toxicity_model}"


@asset(
    partitions_def=shard_partitions,
    deps=[raw_shards, AssetKey("quality_classifier"), AssetKey("toxicity_classifier")],
    group_name="data",
    code_version=filter_code_version(),
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
    context: AssetExecutionContext, config: FilterRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Cleaned, language-identified, rule-filtered, PII-masked documents + rejects + funnel."""
    shard = context.partition_key
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
    ident = begin_output(context, store, out, library_config, inputs)
    with cpu_seconds() as cpu:
        stats = filter_shard(raw_uri, out, library_config)
    every_shard = storage.list_files(store.uri("filtered_shards"), suffixes=("stats.json",))
    overall = aggregate([stats_from_json(storage.read_json(u)) for u in every_shard])
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(
            stats,
            library_config,
            ident,
            uri=out,
            cpu_seconds=cpu["seconds"],
            funnel_all_shards_md=funnel_markdown(overall),
        ),  # fmt: skip
        check_results=[
            check_result("non_empty", verify.non_empty(storage.join(out, "documents.parquet"))),
            check_result("kept_plus_rejected_equals_input", funnel_reconciles(raw_uri, out)),
            check_result(
                "drop_rate_per_reason_within_bounds",
                drop_rates_within(stats, library_config.max_drop_rate_per_reason),
                warn=True,
            ),
        ],
    )
