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

from dagster import SensorResult

from pretrain.recovery.monitor import observe_trends
from sensors.recovery.training_runs import stop_run
from sensors.recovery.watching import Tick, metrics_sensor, resume_latest

NAME = "lr_sensor"


@metrics_sensor(NAME, minimum_interval_seconds=30)
def lr_sensor(tick: Tick) -> SensorResult:
    """Loss plateau / grad-norm creep → resume from the latest checkpoint with a lower LR."""
    run, config, state, rows = tick.watched
    result = observe_trends(state, rows, *tick.settings())
    decision, cursor = result.decision, result.state.to_json()
    if decision.action != "reduce_lr":
        return SensorResult(skip_reason=decision.reason, cursor=cursor)
    run_key = f"reduce-lr-{config.branch}-s{decision.step:09d}"
    request = resume_latest(run, decision, config, run_key=run_key, sensor=NAME)
    stop_run(tick.context.instance, run, decision, NAME, resume=request)
    return SensorResult(run_requests=[request], cursor=cursor)
