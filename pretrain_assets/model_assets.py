"""Model assets: ``checkpoints[key]`` (written by the training job) → ``eval_reports[key]``.

The comparison across checkpoints and the Hugging Face export are in ``eval_assets.py``.

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
from pretrain.eval import EvalConfig, default_tasks, evaluate_checkpoint
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
    task_dir: str = ""  # "" = $PRETRAIN_EVAL_DIR or ~/.cache/pretrain/eval; absent files: skipped
    max_examples_per_task: int = 200
    generations: bool = True


def eval_library_config(config: EvalAssetConfig) -> EvalConfig:
    return EvalConfig(
        max_sequences_per_source=config.max_sequences_per_source,
        batch_size=config.batch_size,
        tasks=default_tasks(config.task_dir or None, config.max_examples_per_task),
        **({} if config.generations else {"generation": None}),
    )


@asset(
    partitions_def=checkpoint_partitions,
    deps=[checkpoints, "tokenizer"],
    group_name="training",
    code_version="eval-v2",
    check_specs=[AssetCheckSpec("metrics_finite", asset="eval_reports")],
)
def eval_reports(
    context: AssetExecutionContext, config: EvalAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """Held-out loss, perplexity and bits per byte per source, zero-shot HellaSwag / ARC-Easy /
    BLiMP accuracy and sampled generations for one checkpoint (Markdown + JSON)."""
    key = context.partition_key
    library_config = eval_library_config(config)
    out = store.uri("eval_reports", key)
    stats = evaluate_checkpoint(
        str(checkpoint_dir_for_key(store.uri("runs"), key)),
        store.uri("packed_tokens"),
        out,
        library_config,
        tokenizer_uri=store.uri("tokenizer"),
    )
    report_md = storage.read_bytes(storage.join(out, "report.md")).decode()
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out, report_md=report_md),
        check_results=[
            check_result("metrics_finite", verify.report_finite(storage.join(out, "report.json")))
        ],
    )


# -- checkpoint health (issue 7) -------------------------------------------------------------
from dagster import (  # noqa: E402  (kept at the end: one self-contained addition)
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    asset_check,
)

from pretrain.train.checkpoint import is_healthy  # noqa: E402


@asset_check(
    asset=checkpoints.key,
    name="healthy",
    partitions_def=checkpoint_partitions,
    description="Healthy: the loss window after this checkpoint was clean, so it is a rollback "
    "target and pruning keeps it. loss_spike_sensor evaluates it as it judges each checkpoint "
    "(suspect → failed, a stopped campaign → failed ERROR on the newest one); running the check "
    "re-reads the label on disk.",
)
def checkpoint_healthy(
    context: AssetCheckExecutionContext, store: ArtifactStore
) -> AssetCheckResult:
    path = checkpoint_dir_for_key(store.uri("runs"), context.partition_key)
    healthy = is_healthy(path)
    return AssetCheckResult(
        passed=healthy,
        severity=AssetCheckSeverity.WARN,
        description="labelled healthy on disk" if healthy else "not labelled healthy (yet)",
        metadata={"path": str(path)},
    )
