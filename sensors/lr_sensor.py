"""``lr_sensor``: loss plateau or grad-norm creep → restart from the latest checkpoint, lower LR.

Each tick reads the running ``train`` run's new metric rows and calls the pure
:func:`pretrain.control.monitor.observe_trends`. On a ``reduce_lr`` decision the run is tagged and
terminated — on SIGTERM the trainer finishes its step and checkpoints it (``checkpoint_on_stop``)
— and a ``train`` run is requested on the *same* branch with ``resume="latest"`` and
``lr_scale × lr_factor``, so the only work lost is the step in flight. No rollback: nothing went
wrong with the weights. A cooldown of two detection windows separates reductions.

Why a restart rather than a control file the trainer polls: the LR is then part of the run's
launch config, visible and replayable in Dagster, recorded in ``run-<id>.json`` and in every
checkpoint's resolved config, so a later crash-resume or rollback resumes with the LR that was
really in effect. A control file would be state outside the config (a resume from an older
checkpoint would silently lose or misapply it), needs a new polling hook in the trainer and its
own audit trail. The price is one restart — a checkpoint save and a torchrun start-up, minutes at
most — for an event that happens a few times per campaign.
"""

from __future__ import annotations

import dataclasses

from dagster import DefaultSensorStatus, SensorEvaluationContext, SensorResult, sensor

from jobs.training import train_job
from pretrain.control.monitor import MonitorState, observe_trends
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from sensors.training_runs import (
    launch_config,
    resume_request,
    resume_step,
    run_settings,
    running_train_run,
    stop_run,
)

NAME = "lr_sensor"


@sensor(
    name=NAME,
    job=train_job,
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Loss plateau / grad-norm creep → resume from the latest checkpoint with a lower LR.",
)
def lr_sensor(
    context: SensorEvaluationContext, metrics: WandbMetricsReader, recovery: RecoveryThresholds
) -> SensorResult:
    state = MonitorState.from_json(context.cursor)
    run = running_train_run(context.instance)
    if run is None:
        return SensorResult(skip_reason="no train run in progress", cursor=state.to_json())
    config = launch_config(run)
    state = state.follow(run.run_id, config["branch"], resume_step(config))
    if state.idle_reason:
        return SensorResult(skip_reason=state.idle_reason, cursor=state.to_json())
    rows, metrics_cursor = metrics.rows_since(config["branch"], state.metrics_cursor)
    result = observe_trends(
        dataclasses.replace(state, metrics_cursor=metrics_cursor),
        rows,
        run_settings(config),
        recovery.detector_config(),
        recovery.policy_config(),
    )
    decision, cursor = result.decision, result.state.to_json()
    if decision.action != "reduce_lr":
        return SensorResult(skip_reason=decision.reason, cursor=cursor)
    stop_run(context.instance, run, decision, NAME)
    request = resume_request(
        run=run,
        decision=decision,
        resume="latest",
        branch=config["branch"],
        run_key=f"reduce-lr-{config['branch']}-s{decision.step:09d}",
        sensor=NAME,
    )
    return SensorResult(run_requests=[request], cursor=cursor)
