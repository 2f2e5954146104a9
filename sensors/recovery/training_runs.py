"""What the recovery sensors share: finding the running ``train`` run, reading its launch config,
stopping it with an audit trail, and requesting the resumed run.

The resumed run reuses the stopped run's typed ``train_model`` config (:class:`TrainRunConfig`)
with ``run.resume``, ``run.branch``, ``run.lr_scale`` and ``run.skip_windows`` replaced, so a recipe or batch size chosen at launch survives
every recovery. Stopping goes through ``instance.run_coordinator.cancel_run``: the run ends
CANCELED (never retried by Dagster), after the op has killed torchrun's whole process group; the
``gpu`` pool keeps the resumed run queued until then.

Stopping and requesting cannot be one transaction: the sensor cancels the run inside its tick,
and the daemon creates the resumed run only after the tick returns. So the stopped run is first
tagged with the planned resume (``pretrain/resume_plan``: run key, checkpoint, branch); if the
daemon dies in between, the next tick finds a stopped run whose plan has no child run and
requests it again under the same ``run_key`` (Dagster's run-key check makes that idempotent).
The escalation budget lives in the same place: the rollbacks recorded in the tags of the
campaign's run chain (:mod:`foundation.campaign`), merged into the cursor's, so a sensor whose cursor
was reset cannot roll back forever.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetKey,
    AssetObservation,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
)

from foundation.campaign import PARENT_TAG, campaign_runs, rollback_spikes
from foundation.config import overrides
from foundation.train_config import TRAIN_OP, Launched, TrainRunConfig, launch_config
from pretrain.checkpoint.dcp import step_of
from pretrain.checkpoint.health import HEALTHY, CheckpointInfo
from pretrain.recovery.monitor import MonitorState
from pretrain.recovery.policy import (
    Decision,
    RunSettings,
    decision_metadata,
)

TRAIN_JOB = "train"
# Dagster's run queue dequeues the highest ``dagster/priority`` first (then the oldest): a resume
# goes ahead of every queued evaluation, proxy or data run (all at the default 0), so a burst of
# them never delays the training the campaign is waiting for.
PRIORITY_TAG, RESUME_PRIORITY = "dagster/priority", 100


def running_train_run(instance: DagsterInstance) -> DagsterRun | None:
    """The newest ``train`` run in STARTED state (the GPU pool runs one at a time), or None."""
    runs = instance.get_runs(
        filters=RunsFilter(job_name=TRAIN_JOB, statuses=[DagsterRunStatus.STARTED]), limit=1
    )
    return runs[0] if runs else None


class Watched(NamedTuple):
    """The running ``train`` run, its launch config, the followed state and its new metric rows."""

    run: DagsterRun
    config: Launched
    state: MonitorState
    rows: list[Any]


def watch_train_run(
    context: SensorEvaluationContext, metrics: Any, sensor: str
) -> Watched | SensorResult:
    """The first half of every recovery tick: find the run, follow it, read new rows.

    Returns a ``SensorResult`` (with the cursor) when there is nothing to watch: a skip, or the
    re-request of a resume that ``sensor`` planned but the daemon never created.
    """
    state = MonitorState.from_json(context.cursor)
    run = running_train_run(context.instance)
    if run is None:
        lost = unsubmitted_resume(context.instance, sensor)
        if lost is not None:
            context.log.warning(f"re-requesting the resume planned in run {lost.tags[PARENT_TAG]}")
            return SensorResult(
                run_requests=[lost], asset_events=decision_record(lost), cursor=state.to_json()
            )
        return SensorResult(skip_reason="no train run in progress", cursor=state.to_json())
    config = Launched.of(launch_config(run))
    if run.run_id != state.run_id:  # a run we have not watched yet: reload the durable budget
        spikes = rollback_spikes(campaign_runs(context.instance, run), context.log.warning)
        state = dataclasses.replace(state, rollbacks=tuple(sorted({*state.rollbacks, *spikes})))
    state = state.follow(run.run_id, config.branch, resume_step(config))
    if state.idle_reason:
        return SensorResult(skip_reason=state.idle_reason, cursor=state.to_json())
    rows, metrics_cursor = metrics.rows_since(config.branch, state.metrics_cursor)
    return Watched(run, config, dataclasses.replace(state, metrics_cursor=metrics_cursor), rows)


def decision_observation(decision: Decision, **extra: Any) -> AssetObservation:
    """The decision as an observation on the checkpoint it resumes from (``extra``: more
    metadata, e.g. the loss curve)."""
    return AssetObservation(
        asset_key=CHECKPOINTS,
        partition=decision.checkpoint_key,
        metadata={**decision_metadata(decision), **extra},
    )


def decision_record(request: RunRequest) -> list[AssetObservation]:
    """The decision behind a re-requested resume, as its observation: the lost tick's own
    observation was never committed."""
    decision = Decision.from_json(request.tags["pretrain/decision"])
    return [decision_observation(decision)] if decision.checkpoint_key else []


def run_settings(config: Launched) -> RunSettings:
    return RunSettings(
        branch=config.branch, lr_scale=config.lr_scale, skip_windows=config.skip_windows
    )


def resume_step(config: Launched) -> int | None:
    """The step a launch resumed from when it names a checkpoint directory, else None."""
    return None if config.resume in ("latest", "none") else step_of(config.resume)


STOPPED_BY_TAG, PLAN_TAG = "pretrain/stopped_by", "pretrain/resume_plan"


def stop_run(
    instance: DagsterInstance,
    run: DagsterRun,
    decision: Decision,
    sensor: str,
    resume: RunRequest | None = None,
) -> None:
    """Tag ``run`` with the decision (and the ``resume`` request planned after it), then request
    its termination (idempotent)."""
    tags = {**decision.run_tags(), STOPPED_BY_TAG: sensor}
    if resume is not None:
        planned = Launched.of(TrainRunConfig(**resume.run_config["ops"][TRAIN_OP]["config"]))
        plan = {"run_key": resume.run_key, "resume": planned.resume, "branch": planned.branch}
        tags[PLAN_TAG] = json.dumps(plan, sort_keys=True)
    instance.add_run_tags(run.run_id, tags)
    instance.run_coordinator.cancel_run(run.run_id)


def unsubmitted_resume(instance: DagsterInstance, sensor: str) -> RunRequest | None:
    """The resume ``sensor`` planned when it stopped the newest ``train`` run, when no run was
    created for it (the daemon died between the tick and the request), else None."""
    runs = instance.get_runs(filters=RunsFilter(job_name=TRAIN_JOB), limit=1)
    if not runs or runs[0].tags.get(STOPPED_BY_TAG) != sensor or PLAN_TAG not in runs[0].tags:
        return None
    stopped = runs[0]
    if instance.get_runs(filters=RunsFilter(tags={PARENT_TAG: stopped.run_id}), limit=1):
        return None
    plan = json.loads(stopped.tags[PLAN_TAG])
    return resume_request(
        run=stopped,
        decision=Decision.from_json(stopped.tags["pretrain/decision"]),
        resume=plan["resume"],
        branch=plan["branch"],
        run_key=plan["run_key"],
        sensor=sensor,
    )


def resume_request(
    *,
    run: DagsterRun,
    decision: Decision,
    resume: str,
    branch: str,
    run_key: str,
    sensor: str,
    extra_tags: dict[str, str] | None = None,
) -> RunRequest:
    """A ``train`` RunRequest continuing ``run`` per ``decision``; ``run_key`` makes it idempotent."""
    values = overrides(launch_config(run))
    values["run"] = {
        **values.get("run", {}),
        "resume": resume,
        "branch": branch,
        "lr_scale": decision.lr_scale,
        "skip_windows": [list(w) for w in decision.skip_windows],
    }
    config = overrides(TrainRunConfig(**values))  # validated against the job's config type
    tags = {
        **decision.run_tags(),
        PARENT_TAG: run.run_id,
        "pretrain/requested_by": sensor,
        PRIORITY_TAG: str(RESUME_PRIORITY),
        **(extra_tags or {}),
    }
    return RunRequest(
        run_key=run_key,
        job_name=TRAIN_JOB,
        run_config={"ops": {TRAIN_OP: {"config": config}}},
        tags=tags,
    )


CHECKPOINTS, HEALTH_CHECK = AssetKey("checkpoints"), "healthy"


def health_checks(
    checkpoints: Sequence[CheckpointInfo], labels: dict[str, str], run_id: str
) -> list[AssetCheckEvaluation]:
    """One ``checkpoints`` ``healthy`` check per newly judged checkpoint (healthy passes; suspect
    fails with WARN: a suspect checkpoint is never a rollback target, nothing is broken yet)."""
    paths = {c.key: c.path for c in checkpoints}
    return [
        AssetCheckEvaluation(
            asset_key=CHECKPOINTS,
            check_name=HEALTH_CHECK,
            partition=key,
            passed=label == HEALTHY,
            severity=AssetCheckSeverity.WARN,
            description=(
                "no alarm in the loss window after this checkpoint"
                if label == HEALTHY
                else "a loss alarm fell inside the window after this checkpoint"
            ),
            metadata={"label": label, "path": paths.get(key, ""), "training_run_id": run_id},
        )
        for key, label in labels.items()
    ]


def stop_check(
    checkpoints: Sequence[CheckpointInfo], decision: Decision, run_id: str
) -> list[AssetCheckEvaluation]:
    """A stop decision as a failed ERROR check on the newest checkpoint of the lineage (none
    when the branch has no checkpoint: the run's tags and the sensor log carry the reason)."""
    if not checkpoints:
        return []
    newest = max(checkpoints, key=lambda c: c.step)
    return [
        AssetCheckEvaluation(
            asset_key=CHECKPOINTS,
            check_name=HEALTH_CHECK,
            partition=newest.key,
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            description=f"campaign STOPPED, a human must decide: {decision.reason}",
            metadata={
                "decision": decision.to_json(),
                "training_run_id": run_id,
                "path": newest.path,
            },
        )
    ]
