"""``toxicity_classifier``: a fastText toxicity classifier trained on your labelled files.

Calls :func:`pretrain.filters.toxicity_classifier.train_toxicity_classifier` once with the
``toxicity`` stage's settings (``labelled_uris``: JSONL/Parquet records with a text and a
true/false label) and reports its held-out precision and recall (a warning check against
``min_heldout_recall``). ``filtered_shards`` loads it: a sentence it scores at
``classifier_threshold`` or above counts as toxic, next to the shipped model and the word
lists. Without labelled files (the default) nothing is trained and the filter goes on
without it. Runs in the ``quality`` job::

    pretrain data --source DIR --toxicity.labelled_uris labels.jsonl
"""

from typing import TYPE_CHECKING, Any

from dagster import AssetCheckSpec, AssetExecutionContext, MaterializeResult, asset

from jobs.config import to_library
from jobs.stages import STAGES
from pretrain import identity
from pretrain.checks import CheckOutcome
from pretrain.filters.toxicity_classifier import (
    ToxicityClassifierConfig,
    train_toxicity_classifier,
)
from pretrain_assets.metadata import begin_output, check_result, finish_output, stage_metadata
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    ToxicityClassifierRunConfig = Any
else:
    ToxicityClassifierRunConfig = STAGES["toxicity"].config_class


@asset(
    group_name="data",
    code_version="toxicity-v1",
    check_specs=[AssetCheckSpec("heldout_recall_above_min", asset="toxicity_classifier")],
)
def toxicity_classifier(
    context: AssetExecutionContext, config: ToxicityClassifierRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """fastText on your toxic/clean labels; filtered_shards flags the sentences it scores high."""
    out = store.uri("toxicity_classifier")
    library_config = to_library(config, ToxicityClassifierConfig)
    # The labelled files are plain files: their size and tail hash join the identity, so new
    # labels make a new classifier (and filtered shards built with the old one stale).
    labels = {uri: identity.file_identity(uri) for uri in library_config.labelled_uris}
    settings = {"config": library_config, "labelled_files": labels}
    ident = begin_output(context, store, out, settings, inputs=[])
    stats = train_toxicity_classifier(out, library_config)
    if stats.skipped and library_config.labelled_uris:
        context.log.warning(stats.skipped)
    if not library_config.labelled_uris:  # nothing asked for, nothing to check
        passed, why = True, f"nothing to check: {stats.skipped}"
    else:
        passed = stats.skipped is None and stats.heldout_recall >= library_config.min_heldout_recall
        why = stats.skipped or (
            f"held-out recall {stats.heldout_recall}, precision {stats.heldout_precision} "
            f"(minimum recall {library_config.min_heldout_recall})"
        )
    recall = CheckOutcome(
        passed,
        why,
        {"heldout_recall": stats.heldout_recall, "heldout_precision": stats.heldout_precision},
    )
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out),
        check_results=[check_result("heldout_recall_above_min", recall, warn=True)],
    )
