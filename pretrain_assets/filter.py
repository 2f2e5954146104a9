"""``filtered_shards[shard]``: one shard group cleaned, language-identified, rule-filtered and
PII-masked, with its rejects and its funnel (library: :mod:`pretrain.filters`; settings
``--filter.*``, ``FilterConfig``). It reads ``quality_classifier`` and ``toxicity_classifier``;
its code version carries the shipped toxicity model's, so a new model makes every filtered
shard stale (the backfill schedule redoes them)."""

from dataclasses import replace

from foundation.assets import ERROR, WARN, Made, StageRun, stage_asset
from foundation.metadata import cpu_seconds
from foundation.partitions import shard_partitions
from pretrain import identity, storage, verify
from pretrain.filters.funnel import drop_rates_within, funnel_reconciles
from pretrain.filters.pipeline import filter_shard
from pretrain.filters.toxicity_model import VERSION as TOXICITY_MODEL_VERSION


def filter_code_version(toxicity_model: str = TOXICITY_MODEL_VERSION) -> str:
    """The filter stage's code version: its rules' version and the shipped toxicity model's."""
    # v5: the toxicity rule reads a model only on sentences of its languages, no document model
    return f"filter-v5+{toxicity_model}"


@stage_asset(
    "filtered_shards",
    stage="filter",
    partitions=shard_partitions,
    deps={"raw_shards": True, "quality_classifier": False, "toxicity_classifier": False},
    code_version=filter_code_version(),
    group="data",
    checks={
        "non_empty": ERROR,
        "kept_plus_rejected_equals_input": ERROR,
        "drop_rate_per_reason_within_bounds": WARN,
    },
)
def filtered_shards(run: StageRun) -> Made:
    """Cleaned, language-identified, rule-filtered, PII-masked documents + rejects + funnel."""
    shard = run.partition or ""
    raw_uri, out = (
        run.uri("raw_shards", shard, "documents.parquet"),
        run.uri("filtered_shards", shard),
    )
    model = run.uri("quality_classifier") if run.launch.use_quality_classifier else None
    config = run.library(quality_model_uri=model)
    classifier: str | None = run.uri("toxicity_classifier")
    if config.toxicity is None or identity.read(classifier or "") is None:
        classifier = None  # rule family off (null), or never materialized: goes on without
    else:
        config = replace(config, toxicity=replace(config.toxicity, classifier_uri=classifier))
    inputs = [run.uri("raw_shards", shard), *(u for u in (model, classifier) if u)]
    ident = run.begin(out, config, inputs)
    with cpu_seconds() as cpu:
        stats = filter_shard(raw_uri, out, config)
    return run.made(out, ident, stats, config, cpu_seconds=cpu["seconds"], checks={
        "non_empty": verify.non_empty(storage.join(out, "documents.parquet")),
        "kept_plus_rejected_equals_input": funnel_reconciles(raw_uri, out),
        "drop_rate_per_reason_within_bounds": drop_rates_within(
            stats, config.max_drop_rate_per_reason
        ),
    })  # fmt: skip
