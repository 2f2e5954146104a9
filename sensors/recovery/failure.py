"""``training_failure_sensor``: a crashed ``train`` run (OOM, killed, lost node) → auto-resume.

Fires on every FAILURE of the ``train`` job (a run terminated by a sensor ends CANCELED and is not
seen here). The resumed run keeps the crashed run's launch config, with ``resume="latest"``: the
training op resolves the newest committed checkpoint of the branch when it starts, so a
checkpoint committed while the crashed run was dying is used too. The retry budget counts
consecutive crash-resumes *without progress*: the attempt number (tag
``pretrain/auto_resume_attempt``) restarts at 1 when the crashed run committed a checkpoint newer
than the one it started from; past ``RecoveryThresholds.max_auto_resumes`` the sensor stops
resuming and logs an error. Runs Dagster itself will retry (tag ``dagster/will_retry=true``) are
skipped; the ``train`` job disables retries so that this sensor owns crash-resume. The run key is
``crash-resume-<failed run id>``: one resume per failure, however often the event is seen.
"""

from __future__ import annotations

from dagster import (
    DefaultSensorStatus,
    RunFailureSensorContext,
    SensorResult,
    run_failure_sensor,
)

from jobs.training import train_job
from pretrain.checkpoint.dcp import damage_reports, latest_checkpoint, step_of
from pretrain.recovery.policy import decide_crash_resume
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from sensors.recovery.training_runs import Launched, launch_config, run_settings
from sensors.recovery.watching import resume_latest

NAME = "training_failure_sensor"
ATTEMPT_TAG, START_STEP_TAG = "pretrain/auto_resume_attempt", "pretrain/resume_checkpoint_step"


@run_failure_sensor(
    name=NAME,
    monitored_jobs=[train_job],
    request_job=train_job,
    minimum_interval_seconds=10,
    default_status=DefaultSensorStatus.RUNNING,
    description="Crashed training → resume from the latest checkpoint (retry budget).",
)
def training_failure_sensor(
    context: RunFailureSensorContext, metrics: WandbMetricsReader, recovery: RecoveryThresholds
) -> SensorResult:
    run = context.dagster_run
    if run.tags.get("dagster/will_retry") == "true":
        return SensorResult(skip_reason=f"run {run.run_id} will be retried by Dagster")
    config = Launched.of(launch_config(run))
    latest = latest_checkpoint(metrics.run_root, config.branch)
    for damaged in damage_reports(metrics.run_root, config.branch):
        context.log.warning(
            f"branch {config.branch}: checkpoint step {damaged['step']} was damaged "
            f"({'; '.join(damaged['problems'])}); resume used {damaged['resumed_from']}"
        )
    latest_step = step_of(latest) if latest is not None else None
    started_at = int(run.tags.get(START_STEP_TAG, "-1"))
    progressed = latest_step is not None and latest_step > started_at
    attempt = 1 if progressed else int(run.tags.get(ATTEMPT_TAG, "0")) + 1
    error = context.failure_event.message or "run failed"
    decision = decide_crash_resume(
        run=run_settings(config),
        attempt=attempt,
        max_resumes=recovery.max_auto_resumes,
        latest_step=latest_step,
        error=error,
    )
    if decision.action == "stop":
        context.instance.add_run_tags(run.run_id, decision.run_tags())
        context.log.error(f"not resuming {run.run_id}: {decision.reason}")
        return SensorResult(skip_reason=f"STOPPED: {decision.reason}")
    request = resume_latest(
        run,
        decision,
        config,
        run_key=f"crash-resume-{run.run_id}",
        sensor=NAME,
        extra_tags={
            ATTEMPT_TAG: str(attempt),
            START_STEP_TAG: str(latest_step if latest_step is not None else -1),
        },
    )
    return SensorResult(run_requests=[request])
