"""The training job: one op that launches ``torchrun -m pretrain.train`` on the ``gpu`` pool.

Launch it from the UI (Jobs → train → Launchpad) or in Python::

    defs.resolve_job_def("train").execute_in_process(
        run_config={"ops": {"train_model": {"config": {"max_steps": 200}}}}, instance=instance)

The op writes the resolved trainer config to ``runs/<branch>/run-<run_id>.json`` and runs the
same command a user would run by hand. Each committed checkpoint arrives as a Pipes custom
message and becomes a ``checkpoints[<branch>-s<step>]`` materialization immediately, while
training continues. Retries are off: crash-resume belongs to one sensor, not to Dagster's
retry machinery (a retried run would race the sensor's resume run).
"""

from pathlib import Path
from typing import Any

from dagster import (
    AssetMaterialization,
    AssetObservation,
    Config,
    Failure,
    MetadataValue,
    OpExecutionContext,
    job,
    op,
)

from jobs.campaign import campaign_runs, loss_curve_md
from pretrain import storage
from pretrain.train.config import TrainConfig, train_config_from_overrides
from pretrain_assets.partitions import checkpoint_partitions
from resources.launcher import TorchrunLauncher
from resources.metrics import WandbMetricsReader
from resources.storage import ArtifactStore


class TrainRunConfig(Config):
    """What an operator sets at launch; everything else comes from the recipe."""

    recipe: str = "debug_tiny"
    branch: str = "b00"
    max_steps: int = 200
    resume: str = "latest"
    lr_scale: float = 1.0
    skip_windows: list[list[int]] = []
    checkpoint_every: int = 50
    micro_batch_size: int = 8
    global_batch_sequences: int = 16
    learning_rate: float | None = None
    warmup_steps: int | None = None
    schedule_steps: int | None = None  # LR schedule horizon; defaults to max_steps
    lr_schedule: str | None = None  # "cosine" or "wsd"; None keeps the recipe's
    z_loss_weight: float | None = None
    healthy_every: int | None = None  # label finite-loss checkpoints healthy every N steps
    async_checkpoint: bool = False
    activation_checkpointing: bool = False
    compile: bool = False
    seed: int = 0
    wandb_mode: str = "offline"


def resolve_train_config(config: TrainRunConfig, store: ArtifactStore) -> TrainConfig:
    """Operator settings + artifact locations → the trainer's full, validated config."""
    run_root = store.local_dir("runs")
    return train_config_from_overrides(
        recipe=config.recipe,
        packed_dir=store.uri("packed_tokens"),
        run_root=run_root,
        branch=config.branch,
        max_steps=config.max_steps,
        resume=config.resume,
        lr_scale=config.lr_scale,
        skip_windows=[tuple(w) for w in config.skip_windows],
        checkpoint_every=config.checkpoint_every,
        micro_batch_size=config.micro_batch_size,
        global_batch_sequences=config.global_batch_sequences,
        learning_rate=config.learning_rate,
        warmup_steps=config.warmup_steps,
        schedule_steps=config.schedule_steps,
        schedule=config.lr_schedule,
        z_loss_weight=config.z_loss_weight,
        healthy_every=config.healthy_every,
        async_checkpoint=config.async_checkpoint,
        activation_checkpointing=config.activation_checkpointing,
        compile=config.compile,
        seed=config.seed,
        wandb_mode=config.wandb_mode,
    )


def checkpoint_materialization(event: dict[str, Any], run_id: str) -> AssetMaterialization:
    return AssetMaterialization(
        asset_key="checkpoints",
        partition=event["key"],
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
        chain = campaign_runs(context.instance, context.instance.get_run_by_id(context.run_id))
        chart = loss_curve_md(chain, WandbMetricsReader(run_root=run_root))
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
    launcher: TorchrunLauncher,
) -> dict[str, Any]:
    """Run the trainer under torchrun; report every committed checkpoint as an asset partition."""
    train_config = resolve_train_config(config, store)
    branch_dir = train_config.branch_dir()  # local (the staging folder of an s3:// run root)
    config_path = str(branch_dir / f"run-{context.run_id}.json")
    storage.write_bytes(train_config.to_json().encode(), config_path)
    summary: dict[str, Any] = {"checkpoints": []}

    def on_message(event: dict[str, Any]) -> None:
        if event.get("event") == "checkpoint":
            # add the partition first: Dagster does not check that a partition exists
            context.instance.add_dynamic_partitions(checkpoint_partitions.name, [event["key"]])
            context.log_event(checkpoint_materialization(event, context.run_id))
            summary["checkpoints"].append(event["key"])
        elif event.get("event") == "checkpoint_damaged":  # resume fell back past it
            summary.setdefault("damaged_checkpoints", []).append(event["path"])
        elif event.get("event") in ("finished", "stopped"):
            summary.update(event)

    returncode = launcher.launch(
        context,
        config_path=config_path,
        log_path=str(branch_dir / f"torchrun-{context.run_id}.log"),
        on_message=on_message,
    )
    if summary["checkpoints"]:
        log_loss_curve(context, train_config.checkpoint.run_root, summary["checkpoints"][-1])
    if returncode != 0 or summary.get("event") != "finished":
        # a SIGTERM from outside Dagster ends the trainer cleanly (checkpoint, exit 0), but the
        # campaign did not reach max_steps: the run must not look successful
        log_tail = Path(branch_dir / f"torchrun-{context.run_id}.log").read_text()[-4000:]
        what = (
            f"exit code {returncode}" if returncode else f"trainer {summary.get('event', 'ended')}"
        )
        raise Failure(
            description=f"training did not finish ({what}); resume from the latest checkpoint",
            metadata={
                "log_tail": MetadataValue.text(log_tail),
                "checkpoints": summary["checkpoints"],
            },
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
