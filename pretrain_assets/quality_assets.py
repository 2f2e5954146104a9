"""``quality_classifier``: a DCLM-style fastText classifier trained on the raw shards.

Reads every materialized ``raw_shards/*/documents.parquet``, calls
:func:`pretrain.quality.classifier.train_quality_classifier` once, and reports its held-out
accuracy (a warning check against ``min_heldout_accuracy``). ``filtered_shards`` loads it and
writes its score into ``quality_score``. Without reference text (your own data, no
``reference_uris``) training is skipped with a warning that says how to add some, and the
filter falls back to the heuristic ``quality_score``.
"""

from dagster import AssetCheckSpec, AssetExecutionContext, Config, MaterializeResult, asset

from pretrain import storage
from pretrain.quality.classifier import QualityClassifierConfig, train_quality_classifier
from pretrain.verify import CheckOutcome
from pretrain_assets.data_assets import raw_shards
from pretrain_assets.metadata import check_result, stage_metadata
from resources.storage import ArtifactStore


class QualityClassifierAssetConfig(Config):
    reference_sources: list[str] = ["prose", "license"]
    reference_uris: list[str] = []  # e.g. books or encyclopedic JSONL files
    negative_sources: list[str] | None = None  # None: every other non-code source
    negatives: str = "auto"  # "pool", "synthetic" or "auto"
    max_docs_per_class: int = 4000
    min_heldout_accuracy: float = 0.7  # a warning floor; measured 0.82 on the demo corpus
    seed: int = 0


def classifier_config(config: QualityClassifierAssetConfig) -> QualityClassifierConfig:
    negative = tuple(config.negative_sources) if config.negative_sources is not None else None
    return QualityClassifierConfig(
        reference_sources=tuple(config.reference_sources),
        reference_uris=tuple(config.reference_uris),
        negative_sources=negative,
        negatives=config.negatives,
        max_docs_per_class=config.max_docs_per_class,
        seed=config.seed,
    )


@asset(
    deps=[raw_shards],
    group_name="data",
    code_version="quality-v2",  # v2: skipped without reference text
    check_specs=[AssetCheckSpec("heldout_accuracy_above_min", asset="quality_classifier")],
)
def quality_classifier(
    context: AssetExecutionContext, config: QualityClassifierAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """fastText: reference-good text vs random pool text; its score becomes quality_score."""
    raw_uris = storage.list_files(store.uri("raw_shards"), suffixes=("documents.parquet",))
    out = store.uri("quality_classifier")
    library_config = classifier_config(config)
    stats = train_quality_classifier(raw_uris, out, library_config)
    if stats.skipped:
        context.log.warning(stats.skipped)
    accuracy = CheckOutcome(
        stats.skipped is None and stats.heldout_accuracy >= config.min_heldout_accuracy,
        stats.skipped
        or f"held-out accuracy {stats.heldout_accuracy} (minimum {config.min_heldout_accuracy})",
        {"heldout_accuracy": stats.heldout_accuracy},
    )
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out, raw_shards=len(raw_uris)),
        check_results=[check_result("heldout_accuracy_above_min", accuracy, warn=True)],
    )
