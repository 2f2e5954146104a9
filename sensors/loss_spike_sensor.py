"""``loss_spike_sensor``: W&B metrics → spike decision → stop training, resume on a new branch.

Each tick: find the running ``train`` run, read its branch's metric rows since the cursor
(:class:`resources.metrics.WandbMetricsReader`), and call the pure
:func:`pretrain.control.monitor.observe_spikes`. Checkpoints whose following steps were clean are
labelled healthy on disk (rollback targets; pruning spares them). On a ``rollback`` decision the
running run is tagged with the decision and terminated, and a ``train`` run is requested with
``resume=<checkpoint>``, ``branch=<new branch>``, ``skip_windows`` and ``lr_scale`` — its
``run_key`` names the old branch, the spike step and the new branch, so a repeated tick never
launches twice. A ``stop`` decision (escalation, grad_norm above the stop threshold, no healthy
checkpoint) terminates the run with the reason in its tags and an error in the sensor log, and the
sensor stays idle until another training run starts. The cursor is
:class:`pretrain.control.monitor.MonitorState` as JSON.
"""

from __future__ import annotations

import dataclasses

from dagster import (
    AssetObservation,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from pretrain.control.checkpoints import apply_health_labels, lineage_checkpoints
from pretrain.control.monitor import MonitorState, observe_spikes
from pretrain.control.policy import decision_metadata
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from sensors.training_runs import (
    launch_config,
    resume_request,
    resume_step,
    run_settings,
    running_train_run,
    stop_run,
)

NAME = "loss_spike_sensor"


@sensor(
    name=NAME,
    minimum_interval_seconds=10,
    default_status=DefaultSensorStatus.RUNNING,
    description="Loss spike / NaN → roll back to a healthy checkpoint on a new branch.",
)
def loss_spike_sensor(
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
    resume = None if config["resume"] in ("latest", "none") else config["resume"]
    checkpoints = lineage_checkpoints(metrics.run_root, config["branch"], resume_path=resume)
    result = observe_spikes(
        dataclasses.replace(state, metrics_cursor=metrics_cursor),
        rows,
        checkpoints,
        run_settings(config),
        recovery.detector_config(),
        recovery.policy_config(),
    )
    apply_health_labels(
        checkpoints, result.labels, reason=f"{NAME}: no alarm in the steps after it"
    )
    decision, cursor = result.decision, result.state.to_json()
    if decision.action == "stop":
        stop_run(context.instance, run, decision, NAME)
        context.log.error(f"training stopped, a human must decide: {decision.reason}")
        return SensorResult(skip_reason=f"STOPPED: {decision.reason}", cursor=cursor)
    if decision.action != "rollback":
        if decision.action == "warn":
            context.log.warning(decision.reason)
        return SensorResult(skip_reason=decision.reason, cursor=cursor)
    assert decision.checkpoint_path and decision.new_branch and decision.spike_step is not None
    stop_run(context.instance, run, decision, NAME)
    request = resume_request(
        run=run,
        decision=decision,
        resume=decision.checkpoint_path,
        branch=decision.new_branch,
        run_key=f"rollback-{decision.branch}-s{decision.spike_step:09d}-to-{decision.new_branch}",
        sensor=NAME,
    )
    observation = AssetObservation(
        asset_key="checkpoints",
        partition=decision.checkpoint_key,
        metadata=decision_metadata(decision),
    )
    return SensorResult(run_requests=[request], asset_events=[observation], cursor=cursor)
