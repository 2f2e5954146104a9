"""Recovery sensors against a real Dagster instance and real offline W&B run files."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetCheckEvaluation,
    AssetObservation,
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    SensorResult,
    build_run_status_sensor_context,
    build_sensor_context,
    instance_for_test,
)

from pretrain.checkpoint.dcp import is_healthy
from pretrain.recovery.policy import Decision
from pretrain.run_files import wandb_run_id
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from sensors.recovery.failure import training_failure_sensor
from sensors.recovery.loss_spike import loss_spike_sensor
from sensors.recovery.lr import lr_sensor
from tests.helpers.checkpoints import committed_step


@pytest.fixture
def instance() -> Any:
    with instance_for_test() as inst:
        yield inst


@pytest.fixture(autouse=True)
def finish_wandb_runs() -> Any:
    yield
    import wandb

    if wandb.run is not None:
        wandb.run.finish()


def write_metrics(run_root: Path, branch: str, losses: dict[int, float], grad: float = 1.0) -> None:
    """A real offline W&B run for ``branch`` with the trainer's keys, id and folder."""
    os.environ["WANDB_SILENT"] = "true"
    import wandb

    run = wandb.init(
        mode="offline",
        dir=str(run_root),
        project="pretrain",
        id=wandb_run_id(run_root, branch),
        resume="allow",
        settings=wandb.Settings(
            x_transaction_log_flush_interval=1.0, console="off", x_disable_stats=True, silent=True
        ),
    )
    for step, loss in losses.items():
        run.log(
            {
                "train/loss": loss,
                "train/grad_norm": grad,
                "train/lr": 1e-3,
                "train/tokens_seen": 512 * step,
            },
            step=step,
        )
    run.finish()


def launch(recipe: str | None = None, **run: Any) -> dict[str, Any]:
    """A ``train_model`` launch config: ``run`` fields nested as the job's config has them."""
    return {"run": run, **({"recipe": recipe} if recipe else {})}


def started_train_run(
    instance: DagsterInstance,
    tags: dict[str, str] | None = None,
    status: DagsterRunStatus = DagsterRunStatus.STARTED,
    **config: Any,
) -> DagsterRun:
    run = DagsterRun(
        job_name="train",
        run_id=str(uuid.uuid4()),
        status=status,
        run_config={"ops": {"train_model": {"config": launch(max_steps=200, **config)}}},
        tags=tags or {},
    )
    instance.add_run(run)
    return run


def resources(run_root: Path, **policy: float) -> dict[str, Any]:
    return {
        "metrics": WandbMetricsReader(run_root=str(run_root)),
        "recovery": RecoveryThresholds(policy={"health_window_steps": 10, **policy}),
    }


def flat(until: int) -> dict[int, float]:
    return {s: 2.0 + 0.01 * (s % 3) for s in range(1, until + 1)}


def test_loss_spike_rolls_back_once_to_a_healthy_checkpoint(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    run_root = tmp_path / "runs"
    paths = {s: committed_step(run_root, "b00", s) for s in (20, 40, 50, 60)}
    write_metrics(run_root, "b00", {**flat(69), 70: 3.5, 71: 2.01, 72: 2.0, 73: 2.02})
    run = started_train_run(
        instance, branch="b00", lr_scale=0.5, skip_windows=[[5, 6]], recipe="debug_tiny"
    )
    context = build_sensor_context(instance=instance, cursor=None, resources=resources(run_root))
    result = loss_spike_sensor(context)
    assert isinstance(result, SensorResult) and len(result.run_requests) == 1
    [request] = result.run_requests
    assert request.run_key == "rollback-b00-s000000070-to-b01"
    assert request.run_config == {
        "ops": {
            "train_model": {
                "config": {
                    "recipe": "debug_tiny",
                    "run": {
                        "max_steps": 200,
                        "branch": "b01",
                        "resume": paths[50],
                        "lr_scale": 0.5,
                        "skip_windows": [[5, 6], [70, 71]],
                    },
                }
            }
        }
    }
    decision = Decision.from_json(request.tags["pretrain/decision"])
    assert (decision.kind, decision.spike_step, decision.onset_step) == ("bad_batch", 70, 70)
    assert decision.skip_tokens == (69 * 512, 70 * 512)
    assert request.tags["pretrain/parent_run_id"] == run.run_id
    assert request.tags["pretrain/checkpoint_key"] == "b00-s000000050"
    *checks, observation = result.asset_events
    assert isinstance(observation, AssetObservation) and observation.partition == "b00-s000000050"
    assert decision.documents == {
        "steps": [70, 71],
        "unavailable": f"no trainer config {run_root / 'b00' / f'run-{run.run_id}.json'}",
    }
    # one `healthy` check per judged checkpoint: the one whose window holds the spike fails
    assert {(c.partition, c.passed, c.check_name) for c in checks} == {
        ("b00-s000000020", True, "healthy"),
        ("b00-s000000040", True, "healthy"),
        ("b00-s000000050", True, "healthy"),
        ("b00-s000000060", False, "healthy"),
    }
    # the running run was tagged and asked to stop; the clean checkpoints are labelled healthy
    stopped = instance.get_run_by_id(run.run_id)
    assert stopped.status == DagsterRunStatus.CANCELING
    assert stopped.tags["pretrain/stopped_by"] == "loss_spike_sensor"
    assert [is_healthy(paths[s]) for s in (20, 40, 50, 60)] == [True, True, True, False]
    # the stopped run records the planned resume before it is cancelled
    assert json.loads(stopped.tags["pretrain/resume_plan"]) == {
        "branch": "b01",
        "resume": paths[50],
        "run_key": request.run_key,
    }
    assert "loss curve" in observation.metadata["loss_curve_md"].value
    # the daemon lost that tick (died after the cancel, before creating the run): the next tick,
    # from the new cursor or a reset one, asks again under the same run_key, which Dagster's
    # run-key check turns into exactly one run
    for cursor in (result.cursor, None):
        again = loss_spike_sensor(
            build_sensor_context(instance=instance, cursor=cursor, resources=resources(run_root))
        )
        assert [(r.run_key, r.run_config) for r in again.run_requests] == [
            (request.run_key, request.run_config)
        ]
        # with the decision's observation, which the lost tick never committed
        assert [(e.partition, type(e)) for e in again.asset_events] == [
            ("b00-s000000050", AssetObservation)
        ]
    # once the daemon created the resumed run (not started yet), nothing more
    queued = started_train_run(
        instance, tags=request.tags, status=DagsterRunStatus.NOT_STARTED, branch="b01"
    )
    for cursor in (result.cursor, None):
        replay = loss_spike_sensor(
            build_sensor_context(instance=instance, cursor=cursor, resources=resources(run_root))
        )
        assert replay.run_requests == []
        assert replay.skip_reason.skip_message == "no train run in progress"
    instance.delete_run(queued.run_id)
    # the resumed run starts on b01: the sensor follows it and keeps watching
    committed_step(run_root, "b01", 80, parent=paths[50])
    write_metrics(run_root, "b01", {s: 2.0 for s in range(51, 90)})
    resumed = started_train_run(
        instance, tags=request.tags, branch="b01", resume=paths[50], lr_scale=0.5
    )
    # with the cursor kept, and with it reset: the rollback budget comes back from the run tags
    for cursor in (result.cursor, None):
        follow = loss_spike_sensor(
            build_sensor_context(instance=instance, cursor=cursor, resources=resources(run_root))
        )
        assert follow.run_requests == [] and follow.skip_reason.skip_message == "no alarm"
        state = json.loads(follow.cursor)
        assert (state["run_id"], state["branch"], state["rollbacks"]) == (
            resumed.run_id,
            "b01",
            [70],
        )
        assert state["scanned_through"] == 89


@pytest.mark.parametrize("budget_in", ["cursor", "run_tags"])
def test_second_spike_in_window_escalates_to_stop(
    tmp_path: Path, instance: DagsterInstance, budget_in: str
) -> None:
    run_root = tmp_path / "runs"
    committed_step(run_root, "b00", 20)
    write_metrics(run_root, "b00", {**flat(40), 41: math_nan(), 42: 2.0})
    res = resources(run_root, max_rollbacks_in_window=1)
    if budget_in == "cursor":
        run = started_train_run(instance, branch="b00")
        cursor = json.dumps({"rollbacks": [30], "tail": [], "flagged": []})
    else:  # a reset cursor: the earlier rollback is known only from the resumed run's tags
        earlier = Decision(
            action="rollback", reason="spike", branch="a00", spike_step=30, new_branch="b00"
        )
        parent = started_train_run(instance, status=DagsterRunStatus.CANCELED, branch="a00")
        run = started_train_run(
            instance,
            tags={**earlier.run_tags(), "pretrain/parent_run_id": parent.run_id},
            branch="b00",
        )
        cursor = None
    result = loss_spike_sensor(
        build_sensor_context(instance=instance, cursor=cursor, resources=res)
    )
    assert result.run_requests == [] and result.skip_reason.skip_message.startswith("STOPPED:")
    stopped = instance.get_run_by_id(run.run_id)
    assert (
        stopped.status == DagsterRunStatus.CANCELING and stopped.tags["pretrain/action"] == "stop"
    )
    assert json.loads(result.cursor)["stopped"] is not None
    # the stop surfaces as a failed ERROR `healthy` check on the newest checkpoint
    [check] = [e for e in result.asset_events if not e.passed]
    assert isinstance(check, AssetCheckEvaluation) and check.partition == "b00-s000000020"
    assert check.severity.value == "ERROR" and "STOPPED" in check.description


def math_nan() -> float:
    return float("nan")


def test_lr_sensor_restarts_latest_with_lower_lr(tmp_path: Path, instance: DagsterInstance) -> None:
    run_root = tmp_path / "runs"
    write_metrics(run_root, "b02", {s: 2.0 for s in range(1, 42)})
    started_train_run(instance, branch="b02", lr_scale=0.9, resume="/x/b01/step-00000010")
    res = {
        **resources(run_root),
        "recovery": RecoveryThresholds(detector={"plateau_steps": 20, "creep_steps": 20}),
    }
    result = lr_sensor(build_sensor_context(instance=instance, cursor=None, resources=res))
    [request] = result.run_requests
    assert request.run_key == "reduce-lr-b02-s000000041"
    config = request.run_config["ops"]["train_model"]["config"]["run"]
    assert (config["resume"], config["branch"], config["lr_scale"]) == (
        "latest",
        "b02",
        pytest.approx(0.72),
    )
    assert request.tags["pretrain/action"] == "reduce_lr"


def failed_train_run(instance: DagsterInstance, tags: dict[str, str], **config: Any) -> Any:
    run = DagsterRun(
        job_name="train",
        run_id=str(uuid.uuid4()),
        status=DagsterRunStatus.STARTED,
        run_config={"ops": {"train_model": {"config": launch(**config)}}},
        tags=tags,
    )
    instance.add_run(run)
    instance.report_run_failed(run, "torchrun exited with code -9")
    [entry] = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_FAILURE)
    return run.run_id, entry.dagster_event


def evaluate_failure(instance: DagsterInstance, run_id: str, event: Any, run_root: Path) -> Any:
    context = build_run_status_sensor_context(
        sensor_name="training_failure_sensor",
        dagster_event=event,
        dagster_instance=instance,
        dagster_run=instance.get_run_by_id(run_id),
        resources=resources(run_root),
    ).for_run_failure()
    return training_failure_sensor(context)


def test_failure_sensor_resumes_with_a_budget(tmp_path: Path, instance: DagsterInstance) -> None:
    run_root = tmp_path / "runs"
    committed_step(run_root, "b01", 30)
    run_id, event = failed_train_run(instance, {}, branch="b01", lr_scale=0.8, max_steps=100)
    result = evaluate_failure(instance, run_id, event, run_root)
    [request] = result.run_requests
    assert request.run_key == f"crash-resume-{run_id}"
    assert request.run_config["ops"]["train_model"]["config"] == {
        "recipe": "debug_tiny",
        "run": {
            "branch": "b01",
            "lr_scale": 0.8,
            "max_steps": 100,
            "resume": "latest",
            "skip_windows": [],
        },
    }
    assert request.tags["pretrain/auto_resume_attempt"] == "1"
    assert request.tags["pretrain/resume_checkpoint_step"] == "30"
    # a resumed run that crashed again without a new checkpoint uses up the budget
    tags = {"pretrain/auto_resume_attempt": "3", "pretrain/resume_checkpoint_step": "30"}
    run_id, event = failed_train_run(instance, tags, branch="b01")
    result = evaluate_failure(instance, run_id, event, run_root)
    assert result.run_requests == [] and "crashed 4 times" in result.skip_reason.skip_message
    # ... but one that committed a checkpoint first starts a fresh budget
    committed_step(run_root, "b01", 40)
    result = evaluate_failure(instance, run_id, event, run_root)
    assert result.run_requests[0].tags["pretrain/auto_resume_attempt"] == "1"
    retried, event = failed_train_run(instance, {"dagster/will_retry": "true"}, branch="b01")
    assert evaluate_failure(instance, retried, event, run_root).run_requests == []


def test_sensors_load_in_definitions_with_their_resources(tmp_path: Path) -> None:
    from dagster import Definitions

    from jobs.training import train_job
    from resources.launcher import TorchrunLauncher
    from resources.storage import ArtifactStore

    defs = Definitions(
        jobs=[train_job],
        sensors=[loss_spike_sensor, lr_sensor, training_failure_sensor],
        resources={
            **resources(tmp_path / "runs"),
            "store": ArtifactStore(root=str(tmp_path)),
            "launcher": TorchrunLauncher(nproc_per_node=1),
        },
    )
    Definitions.validate_loadable(defs)
    names = {s.name for s in defs.get_repository_def().sensor_defs}
    assert names == {"loss_spike_sensor", "lr_sensor", "training_failure_sensor"}
