"""The one ``Definitions`` of the project; ``workspace.yaml`` loads this module.

    dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000     # or: make ui

Artifacts go to ``$PRETRAIN_ROOT`` (a local folder or ``s3://bucket/prefix``), by default
``.pretrain/artifacts`` under the project. Heavy libraries (torch, fasttext, wandb) are
imported by the library modules only when an asset actually runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions, ExecutorDefinition

from jobs.asset_jobs import ASSET_JOBS
from jobs.training import train_job
from pretrain import storage
from pretrain_assets.corpus_assets import data_mixture, packed_tokens, tokenizer
from pretrain_assets.data_assets import filtered_shards, raw_shards
from pretrain_assets.dedup_assets import (
    dedup_clusters,
    dedup_pairs,
    deduped_shards,
    minhash_signatures,
)
from pretrain_assets.eval_assets import eval_comparison, hf_export
from pretrain_assets.model_assets import checkpoint_healthy, checkpoints, eval_reports
from pretrain_assets.plan_assets import scaling_plan
from pretrain_assets.quality_assets import quality_classifier
from resources.launcher import TorchrunLauncher
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from resources.sources import ShardSource
from resources.storage import ArtifactStore
from sensors.backfill_schedule import shard_backfill_schedule
from sensors.eval_sensor import eval_sensor
from sensors.failure_sensor import training_failure_sensor
from sensors.loss_spike_sensor import loss_spike_sensor
from sensors.lr_sensor import lr_sensor
from sensors.shard_discovery import shard_discovery_sensor

PROJECT_DIR = Path(__file__).resolve().parents[1]
ASSETS = [
    raw_shards,
    quality_classifier,
    filtered_shards,
    minhash_signatures,
    dedup_pairs,
    dedup_clusters,
    deduped_shards,
    data_mixture,
    tokenizer,
    packed_tokens,
    scaling_plan,
    checkpoints,
    eval_reports,
    eval_comparison,
    hf_export,
]


def default_artifact_root() -> str:
    return os.environ.get("PRETRAIN_ROOT", str(PROJECT_DIR / ".pretrain" / "artifacts"))


def build_definitions(
    artifact_root: str | None = None,
    s3_endpoint_url: str | None = None,
    nproc_per_node: int = 2,
    executor: ExecutorDefinition | None = None,
) -> Definitions:
    """Definitions with the given storage root; tests build their own with a temp root.

    ``executor`` replaces the default (multiprocess) one for every job, e.g. dagster-ray's
    ``ray_executor`` (``jobs/ray_jobs.py``).
    """
    root = artifact_root or default_artifact_root()
    return Definitions(
        executor=executor,
        assets=ASSETS,
        asset_checks=[checkpoint_healthy],
        jobs=[*ASSET_JOBS, train_job],
        sensors=[
            eval_sensor,
            loss_spike_sensor,
            lr_sensor,
            training_failure_sensor,
            shard_discovery_sensor,
        ],
        schedules=[shard_backfill_schedule],
        resources={
            "store": ArtifactStore(
                root=root,
                s3_endpoint_url=s3_endpoint_url or os.environ.get("PRETRAIN_S3_ENDPOINT_URL"),
            ),
            "launcher": TorchrunLauncher(nproc_per_node=nproc_per_node),
            # the same run root string the training op uses: W&B run ids hash its path
            "metrics": WandbMetricsReader(
                run_root=storage.join(root, "runs"),
                mode=os.environ.get("PRETRAIN_WANDB_MODE", "offline"),
            ),
            "recovery": RecoveryThresholds(),
            "shard_source": ShardSource(
                uri=os.environ.get("PRETRAIN_SOURCE_URI"),
                source_name=os.environ.get("PRETRAIN_SOURCE_NAME", "web"),
            ),
        },
    )


defs = build_definitions()
