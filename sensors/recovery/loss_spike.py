"""``loss_spike_sensor``: W&B metrics → spike decision → stop training, resume on a new branch.

Each tick: find the running ``train`` run, read its branch's metric rows since the cursor
(:class:`resources.metrics.WandbMetricsReader`), and call the pure
:func:`pretrain.recovery.monitor.observe_spikes`. Checkpoints whose following steps were clean are
labelled healthy on disk (rollback targets; pruning spares them). On a ``rollback`` decision the
running run is tagged with the decision and terminated, and a ``train`` run is requested with
``resume=<checkpoint>``, ``branch=<new branch>``, ``skip_windows`` and ``lr_scale`` — its
``run_key`` names the old branch, the spike step and the new branch, so a repeated tick never
launches twice; the resume carries a high run priority (``dagster/priority``), so Dagster's
queue starts it ahead of any queued evaluation, and the queued or running evaluations of the
checkpoints the rollback abandons (the old branch's after the target) are cancelled in the same
tick (:mod:`sensors.recovery.abandoned`). A ``stop`` decision (escalation, grad_norm above the stop threshold, no healthy
checkpoint) terminates the run with the reason in its tags, an error in the sensor log and a
failed ``checkpoints`` ``healthy`` check on the newest checkpoint, and the sensor stays idle until
another training run starts. The cursor is :class:`pretrain.recovery.monitor.MonitorState` as JSON.

Checkpoint health: each checkpoint the monitor judges (``healthy`` once its window of steps was
clean, ``suspect`` when an alarm fell inside it) gets one ``AssetCheckEvaluation`` of the
``checkpoints`` ``healthy`` check on its partition. A rollback's decision names the documents and
sources of the skipped steps (:func:`pretrain.recovery.documents.describe_skip`, from the ledger).
"""

from __future__ import annotations

from dagster import (
    AssetCheckEvaluation,
    AssetObservation,
    MetadataValue,
    SensorResult,
)

from foundation.campaign import campaign_runs, loss_curve_md
from pretrain import storage
from pretrain.checkpoint.health import apply_health_labels, lineage_checkpoints
from pretrain.recovery.documents import describe_skip
from pretrain.recovery.monitor import observe_spikes, unreported_labels
from sensors.recovery.abandoned import (
    abandonment_observations,
    active_evaluations,
    cancel_abandoned_evaluations,
)
from sensors.recovery.training_runs import (
    decision_observation,
    health_checks,
    resume_request,
    stop_check,
    stop_run,
)
from sensors.recovery.watching import Tick, metrics_sensor

NAME = "loss_spike_sensor"


@metrics_sensor(NAME, minimum_interval_seconds=10)
def loss_spike_sensor(tick: Tick) -> SensorResult:
    """Loss spike / NaN → roll back to a healthy checkpoint on a new branch."""
    context, metrics, (run, config, state, rows) = tick.context, tick.metrics, tick.watched
    resume = None if config.resume in ("latest", "none") else config.resume
    checkpoints = lineage_checkpoints(metrics.run_root, config.branch, resume_path=resume)
    result = observe_spikes(state, rows, checkpoints, *tick.settings())
    apply_health_labels(
        checkpoints, result.labels, reason=f"{NAME}: no alarm in the steps after it"
    )
    state, new_labels = unreported_labels(result.state, result.labels)
    checks = health_checks(checkpoints, new_labels, run.run_id)
    decision, cursor = result.decision, state.to_json()
    if decision.action == "stop":
        stop_run(context.instance, run, decision, NAME)
        context.log.error(f"training stopped, a human must decide: {decision.reason}")
        checks += stop_check(checkpoints, decision, run.run_id)
        return SensorResult(
            skip_reason=f"STOPPED: {decision.reason}", cursor=cursor, asset_events=checks
        )
    if decision.action != "rollback":
        if decision.action == "warn":
            context.log.warning(decision.reason)
        return SensorResult(skip_reason=decision.reason, cursor=cursor, asset_events=checks)
    assert decision.checkpoint_path and decision.new_branch and decision.spike_step is not None
    resume, new_branch = decision.checkpoint_path, decision.new_branch
    config_path = storage.join(metrics.run_root, config.branch, f"run-{run.run_id}.json")
    decision = describe_skip(decision, config_path)
    request = resume_request(
        run=run,
        decision=decision,
        resume=resume,
        branch=new_branch,
        run_key=f"rollback-{decision.branch}-s{decision.spike_step:09d}-to-{decision.new_branch}",
        sensor=NAME,
    )
    stop_run(context.instance, run, decision, NAME, resume=request)
    # the old branch's checkpoints after the target are abandoned: their evaluations go now
    evaluations = active_evaluations(context.instance)
    abandoned = cancel_abandoned_evaluations(context.instance, evaluations, [decision])
    stopped = context.instance.get_run_by_id(run.run_id)
    assert stopped is not None  # the run this sensor has just stopped
    chain = campaign_runs(context.instance, stopped)
    chart = MetadataValue.md(loss_curve_md(chain, metrics, context.log.warning))
    observation = decision_observation(decision, loss_curve_md=chart)
    events: list[AssetCheckEvaluation | AssetObservation] = [
        *checks,
        observation,
        *abandonment_observations(abandoned),
    ]
    return SensorResult(run_requests=[request], asset_events=events, cursor=cursor)
