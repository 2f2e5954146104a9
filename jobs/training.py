"""The training job: one op that launches ``torchrun -m pretrain.train`` on the ``gpu`` pool.

Launch it from the UI (Jobs → train → Launchpad) or in Python::

    defs.resolve_job_def("train").execute_in_process(
        run_config={"ops": {"train_model": {"config": {"recipe": "debug_tiny",
                                                       "run": {"max_steps": 200}}}}},
        instance=instance)

The op writes the resolved trainer config to ``<run root>/<branch>/run-<run_id>.json`` (an
``s3://`` URI when the artifact root is on S3: the nodes then need no filesystem shared with
Dagster) and runs the same command a user would run by hand. Each committed checkpoint arrives as a Pipes custom
message and becomes a ``checkpoints[<branch>-s<step>]`` materialization immediately, while
training continues. Retries are off: crash-resume belongs to one sensor, not to Dagster's
retry machinery (a retried run would race the sensor's resume run).
"""

import hashlib
from typing import Any

from dagster import (
    AssetMaterialization,
    AssetObservation,
    Failure,
    MetadataValue,
    OpExecutionContext,
    ResourceParam,
    job,
    op,
)

from foundation.campaign import campaign_runs, loss_curve_md
from foundation.data_versions import DATA_VERSION_TAG
from foundation.partitions import CHECKPOINT_PARTITIONS_NAME
from foundation.train_config import TrainRunConfig, resolve_train_config
from pretrain import storage
from resources.launching import Launcher
from resources.metrics import WandbMetricsReader
from resources.storage import ArtifactStore

# the event tag Dagster reads a materialization's data version from (no public constant)


def checkpoint_materialization(event: dict[str, Any], run_id: str) -> AssetMaterialization:
    """The ``checkpoints[key]`` materialization of a committed checkpoint. Its data version is
    the checkpoint's own identity (key, run config, weights:
    :func:`pretrain.checkpoint.checkpointer.checkpoint_identity`), what an eval report records
    as its input, so a sensor can tell a report of this very checkpoint from one of an earlier
    checkpoint with the same key. A trainer that sent no identity: a hash of run, key and path."""
    fallback = hashlib.sha256(f"{run_id}/{event['key']}/{event['path']}".encode()).hexdigest()
    return AssetMaterialization(
        asset_key="checkpoints",
        partition=event["key"],
        tags={DATA_VERSION_TAG: str(event.get("version") or fallback)},
        metadata={
            "step": int(event["step"]),
            "loss": float(event["loss"]) if event.get("loss") is not None else float("nan"),
            "tokens_seen": int(event.get("tokens_seen", 0)),
            "path": MetadataValue.path(str(event["path"])),
            "branch": str(event.get("branch", "")),
            "training_run_id": run_id,
        },
    )


def log_loss_curve(context: OpExecutionContext, run_root: str, checkpoint_key: str) -> None:
    """The campaign's loss curve, with every recovery decision so far, on the newest checkpoint
    (an observation: the chart never changes the checkpoint's data version)."""
    try:
        run = context.instance.get_run_by_id(context.run_id)
        assert run is not None  # this op's own run
        chain = campaign_runs(context.instance, run)
        chart = loss_curve_md(chain, WandbMetricsReader(run_root=run_root), context.log.warning)
    except Exception as exc:  # a chart must never decide a training run's outcome
        context.log.warning(f"no loss curve: {exc!r}")
        return
    context.log_event(
        AssetObservation(
            asset_key="checkpoints",
            partition=checkpoint_key,
            metadata={"loss_curve_md": MetadataValue.md(chart)},
        )
    )


@op(pool="gpu", tags={"dagster/max_retries": "0"})
def train_model(
    context: OpExecutionContext,
    config: TrainRunConfig,
    store: ArtifactStore,
    launcher: ResourceParam[Launcher],
) -> dict[str, Any]:
    """Run the trainer through the launcher (local torchrun, Slurm, Kubernetes); report every
    committed checkpoint as an asset partition."""
    train_config = resolve_train_config(config, store)
    # the launcher's own files (batch script; the job log unless the run root is s3://, where
    # the Slurm job copies it next to the config): local, the staging folder of an s3:// run
    # root. The trainer's config sits next to the branch's checkpoints, in the run root:
    # s3:// when remote, so the nodes read it, as everything else, from S3 alone
    branch_dir = train_config.branch_dir()
    config_path = storage.join(
        train_config.checkpoint.run_root, train_config.run.branch, f"run-{context.run_id}.json"
    )
    storage.write_bytes(train_config.to_json().encode(), config_path)
    summary: dict[str, Any] = {"checkpoints": []}

    def on_message(event: dict[str, Any]) -> None:
        if event.get("event") == "checkpoint":
            # add the partition first: Dagster does not check that a partition exists
            context.instance.add_dynamic_partitions(CHECKPOINT_PARTITIONS_NAME, [event["key"]])
            context.log_event(checkpoint_materialization(event, context.run_id))
            summary["checkpoints"].append(event["key"])
        elif event.get("event") == "checkpoint_damaged":  # resume fell back past it
            summary.setdefault("damaged_checkpoints", []).append(event["path"])
        elif event.get("event") in ("finished", "stopped"):
            summary.update(event)

    result = launcher.launch(
        context, config_path=config_path, run_dir=str(branch_dir), on_message=on_message
    )
    if summary["checkpoints"]:
        log_loss_curve(context, train_config.checkpoint.run_root, summary["checkpoints"][-1])
    if not result.ok or summary.get("event") != "finished":
        # a SIGTERM from outside Dagster ends the trainer cleanly (checkpoint, exit 0), but the
        # campaign did not reach max_steps: the run must not look successful. The log shown is
        # the launcher's own (torchrun's output, the Slurm job's log, the master pod's log).
        what = (
            f"exit code {result.returncode}"
            if not result.ok
            else f"trainer {summary.get('event', 'ended')}"
        )
        raise Failure(
            description=(
                f"training did not finish ({what}; job {result.job_id}, log {result.log_path});"
                " resume from the latest checkpoint"
            ),
            metadata={**result.metadata(), "checkpoints": summary["checkpoints"]},
        )
    context.log.info(f"training finished: {summary}")
    return summary


@job(
    name="train",
    description="Launch FSDP2 training with torchrun on the GPU pool; one run at a time.",
    tags={"dagster/max_retries": "0"},
)
def train_job() -> None:
    train_model()
