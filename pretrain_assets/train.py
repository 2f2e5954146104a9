"""``checkpoints[key]``: written by the ``train`` job while it runs, plus its ``healthy`` check
(library: :mod:`pretrain.train`, :mod:`pretrain.checkpoint`; settings ``--train.*``).

``checkpoints`` is declared here for lineage; its partitions are materialized by the training op
as each checkpoint commits (``jobs/training.py``). Evaluation and export of a checkpoint are
``pretrain_assets/eval.py`` and ``pretrain_assets/export.py``.
"""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetSpec,
    asset_check,
)

from foundation.partitions import checkpoint_partitions
from pretrain import identity
from pretrain.checkpoint.dcp import checkpoint_dir_for_key, is_healthy
from resources.storage import ArtifactStore

checkpoints = AssetSpec(
    "checkpoints",
    deps=["packed_tokens", "tokenizer", "scaling_plan"],
    partitions_def=checkpoint_partitions,
    group_name="training",
    description="torch.distributed.checkpoint directories, one partition per <branch>-s<step>; "
    "materialized by the `train` job while it runs.",
)


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
    checked = identity.read(str(path))  # the label is about this exact checkpoint
    return AssetCheckResult(
        passed=healthy,
        severity=AssetCheckSeverity.WARN,
        description="labelled healthy on disk" if healthy else "not labelled healthy (yet)",
        metadata={"path": str(path), "identity": checked.version if checked else "none"},
    )
