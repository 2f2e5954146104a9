"""``lr_sensor``: loss plateau or grad-norm creep → restart from the latest checkpoint, lower LR.

Each tick reads the running ``train`` run's new metric rows and calls the pure
:func:`pretrain.recovery.monitor.observe_trends`. On a ``reduce_lr`` decision the run is tagged and
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

from dagster import DefaultSensorStatus, SensorEvaluationContext, SensorResult, sensor

from jobs.training import train_job
from pretrain.recovery.monitor import observe_trends
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from sensors.recovery.training_runs import (
    resume_request,
    run_settings,
    stop_run,
    watch_train_run,
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
    watched = watch_train_run(context, metrics, NAME)
    if isinstance(watched, SensorResult):
        return watched
    run, config, state, rows = watched
    result = observe_trends(
        state,
        rows,
        run_settings(config),
        recovery.detector_config(),
        recovery.policy_config(),
    )
    decision, cursor = result.decision, result.state.to_json()
    if decision.action != "reduce_lr":
        return SensorResult(skip_reason=decision.reason, cursor=cursor)
    request = resume_request(
        run=run,
        decision=decision,
        resume="latest",
        branch=config.branch,
        run_key=f"reduce-lr-{config.branch}-s{decision.step:09d}",
        sensor=NAME,
    )
    stop_run(context.instance, run, decision, NAME, resume=request)
    return SensorResult(run_requests=[request], cursor=cursor)
