"""``toxicity_classifier``: a fastText toxicity classifier trained on your labelled files
(library: :mod:`pretrain.filters.toxicity_classifier`; settings ``--toxicity.*``).

``labelled_uris``: JSONL/Parquet records with a text and a true/false label; the asset reports
the held-out precision and recall (a warning check against ``min_heldout_recall``).
``filtered_shards`` loads it: a sentence it scores at ``classifier_threshold`` or above counts
as toxic, next to the shipped model and the word lists. Without labelled files (the default)
nothing is trained and the filter goes on without it::

    pretrain data --source DIR --toxicity.labelled_uris labels.jsonl
"""

from foundation.assets import WARN, Made, StageRun, stage_asset
from pretrain import identity
from pretrain.checks import CheckOutcome
from pretrain.filters.toxicity_classifier import train_toxicity_classifier


@stage_asset(
    "toxicity_classifier",
    stage="toxicity",
    code_version="toxicity-v1",
    group="data",
    checks={"heldout_recall_above_min": WARN},
)
def toxicity_classifier(run: StageRun) -> Made:
    """fastText on your toxic/clean labels; filtered_shards flags the sentences it scores high."""
    out, config = run.uri("toxicity_classifier"), run.library()
    # The labelled files are plain files: their size and tail hash join the identity, so new
    # labels make a new classifier (and filtered shards built with the old one stale).
    labels = {uri: identity.file_identity(uri) for uri in config.labelled_uris}
    ident = run.begin(out, {"config": config, "labelled_files": labels}, inputs=[])
    stats = train_toxicity_classifier(out, config)
    if stats.skipped and config.labelled_uris:
        run.context.log.warning(stats.skipped)
    if not config.labelled_uris:  # nothing asked for, nothing to check
        passed, why = True, f"nothing to check: {stats.skipped}"
    else:
        passed = stats.skipped is None and stats.heldout_recall >= config.min_heldout_recall
        why = stats.skipped or (
            f"held-out recall {stats.heldout_recall}, precision {stats.heldout_precision} "
            f"(minimum recall {config.min_heldout_recall})"
        )
    recall = CheckOutcome(passed, why, {"heldout_recall": stats.heldout_recall,
                                        "heldout_precision": stats.heldout_precision})  # fmt: skip
    return run.made(out, ident, stats, config, checks={"heldout_recall_above_min": recall})
