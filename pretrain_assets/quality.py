"""``quality_classifier``: a DCLM-style fastText classifier trained on the raw shards (library:
:mod:`pretrain.quality`; settings ``--quality.*``).

Reads every materialized ``raw_shards/*/documents.parquet``, trains once, and reports its
held-out accuracy (a warning check against ``min_heldout_accuracy``). ``filtered_shards`` loads
it and writes its score into ``quality_score``. Without reference text (your own data, no
``reference_uris``) training is skipped with a warning that says how to add some, and the filter
falls back to the heuristic ``quality_score``.
"""

from foundation.assets import WARN, Made, StageRun, stage_asset
from pretrain import storage
from pretrain.checks import CheckOutcome
from pretrain.quality.classifier import train_quality_classifier


@stage_asset(
    "quality_classifier",
    stage="quality",
    deps=["raw_shards"],
    code_version="quality-v2",  # v2: skipped without reference text
    group="data",
    checks={"heldout_accuracy_above_min": WARN},
)
def quality_classifier(run: StageRun) -> Made:
    """fastText: reference-good text vs random pool text; its score becomes quality_score."""
    raw = storage.list_files(run.uri("raw_shards"), suffixes=("documents.parquet",))
    out, config = run.uri("quality_classifier"), run.library()
    ident = run.begin(out, config, sorted({uri.rsplit("/", 1)[0] for uri in raw}))
    stats = train_quality_classifier(raw, out, config)
    if stats.skipped:
        run.context.log.warning(stats.skipped)
    passed = stats.skipped is None and stats.heldout_accuracy >= config.min_heldout_accuracy
    why = stats.skipped or (
        f"held-out accuracy {stats.heldout_accuracy} (minimum {config.min_heldout_accuracy})"
    )
    accuracy = CheckOutcome(passed, why, {"heldout_accuracy": stats.heldout_accuracy})
    return run.made(out, ident, stats, config, raw_shards=len(raw),
                    checks={"heldout_accuracy_above_min": accuracy})  # fmt: skip
