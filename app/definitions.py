"""The one ``Definitions`` of the project; ``workspace.yaml`` loads this module.

    dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000     # or: make ui

Artifacts go to ``$PRETRAIN_ROOT`` (a local folder or ``s3://bucket/prefix``), by default
``.pretrain/artifacts`` under the project. Heavy libraries (torch, fasttext, wandb) are
imported by the library modules only when an asset actually runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dagster import AssetsDefinition, AssetSpec, BackfillPolicy, Definitions, ExecutorDefinition
from dagster_aws.s3 import S3Resource

from foundation.partitions import shard_partitions
from foundation.per_shard import PARTITIONS_PER_RUN
from jobs.asset_jobs import ASSET_JOBS
from jobs.launch_search import launch_search_job
from jobs.training import train_job
from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.experiments.admission import AdmissionConfig
from pretrain_assets.admission import data_admission
from pretrain_assets.basis import ablation_pools, experiment_basis, proxy_pools
from pretrain_assets.dedup import dedup_clusters, dedup_pairs, deduped_shards, minhash_signatures
from pretrain_assets.eval import eval_comparison, eval_reports
from pretrain_assets.export import hf_export
from pretrain_assets.filter import filtered_shards
from pretrain_assets.mixture import data_mixture
from pretrain_assets.packing import packed_tokens
from pretrain_assets.plan import scaling_plan
from pretrain_assets.proxy import proxy_runs
from pretrain_assets.quality import quality_classifier
from pretrain_assets.quarantine import confirmed_quarantine, quarantined_documents
from pretrain_assets.raw import raw_shards
from pretrain_assets.search import mixture_search
from pretrain_assets.tokenizer import tokenizer
from pretrain_assets.toxicity import toxicity_classifier
from pretrain_assets.train import checkpoint_healthy, checkpoints
from resources.kubernetes import KubernetesLauncher
from resources.launcher import TorchrunLauncher
from resources.launching import Launcher
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from resources.slurm import SlurmLauncher
from resources.sources import ShardSource
from resources.storage import ArtifactStore
from sensors.backfill_schedule import shard_backfill_schedule
from sensors.eval_sensor import eval_sensor
from sensors.experiments import experiment_sensor_for
from sensors.recovery.failure import training_failure_sensor
from sensors.recovery.loss_spike import loss_spike_sensor
from sensors.recovery.lr import lr_sensor
from sensors.recovery.quarantine import quarantine_sensor
from sensors.shard_discovery import shard_discovery_sensor

PROJECT_DIR = Path(__file__).resolve().parents[1]
ASSETS: list[AssetsDefinition | AssetSpec] = [
    raw_shards,
    quality_classifier,
    toxicity_classifier,
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
    quarantined_documents,
    confirmed_quarantine,
    experiment_basis,
    proxy_pools,
    ablation_pools,
    proxy_runs,
    mixture_search,
    data_admission,
]


def default_artifact_root() -> str:
    return os.environ.get("PRETRAIN_ROOT", str(PROJECT_DIR / ".pretrain" / "artifacts"))


LAUNCHERS = {"torchrun": TorchrunLauncher, "slurm": SlurmLauncher, "kubernetes": KubernetesLauncher}


def launcher_from_env(nproc_per_node: int = 2, s3_endpoint_url: str | None = None) -> Launcher:
    """``$PRETRAIN_LAUNCHER`` (torchrun, slurm, kubernetes; default torchrun) configured with
    ``$PRETRAIN_LAUNCHER_CONFIG``, a JSON object of the launcher's fields, e.g.
    ``PRETRAIN_LAUNCHER=slurm PRETRAIN_LAUNCHER_CONFIG='{"nodes": 4, "partition": "gpu"}'``.

    ``s3_endpoint_url`` (the artifact store's) becomes the endpoint of a Slurm or Kubernetes
    launcher's ``s3`` settings, so the campaign's S3 endpoint is set in one place; an ``s3``
    entry in the launcher config naming another endpoint is an error."""
    kind = os.environ.get("PRETRAIN_LAUNCHER", "torchrun")
    if kind not in LAUNCHERS:
        raise ValueError(f"PRETRAIN_LAUNCHER={kind!r}: choose one of {sorted(LAUNCHERS)}")
    fields = json.loads(os.environ.get("PRETRAIN_LAUNCHER_CONFIG") or "{}")
    if kind == "torchrun":
        fields = {"nproc_per_node": nproc_per_node, **fields}
    elif s3_endpoint_url or fields.get("s3"):
        s3 = dict(fields.get("s3") or {})
        if s3.get("endpoint_url") not in (None, s3_endpoint_url):
            raise ConfigError(
                f"PRETRAIN_LAUNCHER_CONFIG s3.endpoint_url={s3['endpoint_url']!r} differs from "
                f"the artifact store's {s3_endpoint_url!r}; set the endpoint once, with "
                "PRETRAIN_S3_ENDPOINT_URL, and leave it out of the launcher config"
            )
        fields["s3"] = S3Resource(**{**s3, "endpoint_url": s3_endpoint_url})
    return LAUNCHERS[kind](**fields)


def batched(partitions_per_run: int | None) -> list[AssetsDefinition | AssetSpec]:
    """The assets, the per-shard ones backfilled ``partitions_per_run`` shard groups a run
    (default ``$PRETRAIN_PARTITIONS_PER_RUN``, else ``per_shard.PARTITIONS_PER_RUN``)."""
    n = partitions_per_run or int(
        os.environ.get("PRETRAIN_PARTITIONS_PER_RUN") or PARTITIONS_PER_RUN
    )
    if n < 1:
        raise ConfigError(f"partitions per run = {n}: use at least 1 (1: a run per shard group)")
    policy = BackfillPolicy.multi_run(n)
    return [
        a.with_attributes(backfill_policy=policy)
        if isinstance(a, AssetsDefinition) and a.partitions_def == shard_partitions
        else a
        for a in ASSETS
    ]


def build_definitions(
    artifact_root: str | None = None,
    s3_endpoint_url: str | None = None,
    nproc_per_node: int = 2,
    executor: ExecutorDefinition | None = None,
    admission: AdmissionConfig | None = None,
    partitions_per_run: int | None = None,
) -> Definitions:
    """Definitions with the given storage root; tests build their own with a temp root.

    ``executor`` replaces the default (multiprocess) one for every job, e.g. dagster-ray's
    ``ray_executor`` (``app/ray_definitions.py``). ``admission``
    is how ``experiment_sensor`` tries new shard groups (default ``AdmissionConfig()``).
    ``partitions_per_run``: shard groups a backfill run materializes (see :func:`batched`).
    """
    root = artifact_root or default_artifact_root()
    endpoint = s3_endpoint_url or os.environ.get("PRETRAIN_S3_ENDPOINT_URL")
    return Definitions(
        executor=executor,
        assets=batched(partitions_per_run),
        asset_checks=[checkpoint_healthy],
        jobs=[*ASSET_JOBS, train_job, launch_search_job],
        sensors=[
            eval_sensor,
            loss_spike_sensor,
            lr_sensor,
            quarantine_sensor,
            training_failure_sensor,
            shard_discovery_sensor,
            experiment_sensor_for(admission or AdmissionConfig()),
        ],
        schedules=[shard_backfill_schedule],
        resources={
            "store": ArtifactStore(root=root, s3_endpoint_url=endpoint),
            "launcher": launcher_from_env(nproc_per_node, s3_endpoint_url=endpoint),
            # proxies: one process with both cores beats two gloo ranks on a small model
            "proxy_launcher": TorchrunLauncher(nproc_per_node=1, threads_per_process=2),
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
