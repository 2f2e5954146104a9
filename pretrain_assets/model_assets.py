"""Model assets: ``checkpoints[key]`` (written by the training job) → ``eval_reports[key]``.

``checkpoints`` is declared here for lineage; its partitions are materialized by the
training op as each checkpoint commits (see ``jobs/training.py``).
"""

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetSpec,
    Config,
    MaterializeResult,
    asset,
)

from pretrain import storage, verify
from pretrain.eval import EvalConfig, evaluate_checkpoint
from pretrain.train.checkpoint import checkpoint_dir_for_key
from pretrain_assets.metadata import check_result, stage_metadata
from pretrain_assets.partitions import checkpoint_partitions
from resources.storage import ArtifactStore

checkpoints = AssetSpec(
    "checkpoints",
    deps=["packed_tokens", "tokenizer", "scaling_plan"],
    partitions_def=checkpoint_partitions,
    group_name="training",
    description="torch.distributed.checkpoint directories, one partition per <branch>-s<step>; "
    "materialized by the `train` job while it runs.",
)


class EvalAssetConfig(Config):
    max_sequences_per_source: int = 64
    batch_size: int = 8


@asset(
    partitions_def=checkpoint_partitions,
    deps=[checkpoints],
    group_name="training",
    code_version="eval-v1",
    check_specs=[AssetCheckSpec("metrics_finite", asset="eval_reports")],
)
def eval_reports(
    context: AssetExecutionContext, config: EvalAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """Validation loss and perplexity per source for one checkpoint (Markdown + JSON)."""
    key = context.partition_key
    library_config = EvalConfig(
        max_sequences_per_source=config.max_sequences_per_source, batch_size=config.batch_size
    )
    out = store.uri("eval_reports", key)
    stats = evaluate_checkpoint(
        str(checkpoint_dir_for_key(store.uri("runs"), key)),
        store.uri("packed_tokens"),
        out,
        library_config,
    )
    report_md = storage.read_bytes(storage.join(out, "report.md")).decode()
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out, report_md=report_md),
        check_results=[
            check_result("metrics_finite", verify.report_finite(storage.join(out, "report.json")))
        ],
    )
