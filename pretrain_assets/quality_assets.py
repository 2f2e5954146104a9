"""``quality_classifier``: a DCLM-style fastText classifier trained on the raw shards.

Reads every materialized ``raw_shards/*/documents.parquet``, calls
:func:`pretrain.quality.classifier.train_quality_classifier` once, and reports its held-out
accuracy (a warning check against ``min_heldout_accuracy``). ``filtered_shards`` loads it and
writes its score into ``quality_score``. Without reference text (your own data, no
``reference_uris``) training is skipped with a warning that says how to add some, and the
filter falls back to the heuristic ``quality_score``.
"""

from typing import TYPE_CHECKING, Any

from dagster import AssetCheckSpec, AssetExecutionContext, MaterializeResult, asset

from jobs.config import to_library
from jobs.stages import STAGES
from pretrain import storage
from pretrain.checks import CheckOutcome
from pretrain.quality.classifier import QualityClassifierConfig, train_quality_classifier
from pretrain_assets.data_assets import raw_shards
from pretrain_assets.metadata import begin_output, check_result, finish_output, stage_metadata
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    QualityClassifierRunConfig = Any
else:
    QualityClassifierRunConfig = STAGES["quality"].config_class


@asset(
    deps=[raw_shards],
    group_name="data",
    code_version="quality-v2",  # v2: skipped without reference text
    check_specs=[AssetCheckSpec("heldout_accuracy_above_min", asset="quality_classifier")],
)
def quality_classifier(
    context: AssetExecutionContext, config: QualityClassifierRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """fastText: reference-good text vs random pool text; its score becomes quality_score."""
    raw_uris = storage.list_files(store.uri("raw_shards"), suffixes=("documents.parquet",))
    out = store.uri("quality_classifier")
    library_config = to_library(config, QualityClassifierConfig)
    inputs = sorted({uri.rsplit("/", 1)[0] for uri in raw_uris})
    ident = begin_output(context, store, out, library_config, inputs)
    stats = train_quality_classifier(raw_uris, out, library_config)
    if stats.skipped:
        context.log.warning(stats.skipped)
    accuracy = CheckOutcome(
        stats.skipped is None and stats.heldout_accuracy >= library_config.min_heldout_accuracy,
        stats.skipped
        or f"held-out accuracy {stats.heldout_accuracy} "
        f"(minimum {library_config.min_heldout_accuracy})",
        {"heldout_accuracy": stats.heldout_accuracy},
    )
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out, raw_shards=len(raw_uris)),
        check_results=[check_result("heldout_accuracy_above_min", accuracy, warn=True)],
    )
