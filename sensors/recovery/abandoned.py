"""Checkpoints a rollback abandoned: their queued evaluations cancelled, the reason on the UI.

When ``loss_spike_sensor`` rolls branch ``b`` back to step ``s``, every checkpoint of ``b``
after ``s`` is abandoned (:func:`pretrain.recovery.evaluations.abandonment`): training goes on
from a new branch. Here, the Dagster side of that:

    cancel_abandoned_evaluations(instance, active_evaluations(instance), rollbacks)
    abandonment_observations({key: reason})   # on ``checkpoints[key]``: why it has no report

An evaluation run that was queued (or already running) for such a checkpoint is cancelled, and
its tags say why (``pretrain/cancelled_because``), so neither the queue nor the CPUs/GPUs hold
work the campaign has thrown away. ``loss_spike_sensor`` does this in the tick that decides,
``eval_sensor`` on every tick (an evaluation it requested in the same moment is caught there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dagster import (
    AssetKey,
    AssetObservation,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunsFilter,
)

from foundation.decisions import spike_rollbacks
from foundation.stages import job_name
from pretrain.recovery.evaluations import abandonment
from pretrain.recovery.policy import Decision

EVAL_JOB, PARTITION_TAG = job_name("eval_reports"), "dagster/partition"
CANCELLED_TAG = "pretrain/cancelled_because"
CHECKPOINTS = AssetKey("checkpoints")
ACTIVE_STATUSES = (
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
)


def rollbacks(instance: DagsterInstance, warn: Callable[[str], None]) -> list[Decision]:
    """Every rollback decision of the campaign (a run whose tag cannot be read is skipped)."""
    return [decision for _, decision in spike_rollbacks(instance, warn)]


def active_evaluations(instance: DagsterInstance) -> list[DagsterRun]:
    """``evaluate`` runs queued, starting, running or stopping."""
    return list(instance.get_runs(RunsFilter(job_name=EVAL_JOB, statuses=list(ACTIVE_STATUSES))))


def cancel_abandoned_evaluations(
    instance: DagsterInstance, runs: Sequence[DagsterRun], rollbacks: Sequence[Decision]
) -> dict[str, str]:
    """Cancel each of ``runs`` that evaluates an abandoned checkpoint, with the reason in its
    tags; returns {checkpoint key: reason} of those cancelled (a run already cancelled is
    left alone)."""
    cancelled: dict[str, str] = {}
    for run in runs:
        key = run.tags.get(PARTITION_TAG)
        reason = abandonment(key, rollbacks) if key else None
        if key is None or reason is None or CANCELLED_TAG in run.tags:
            continue
        instance.add_run_tags(run.run_id, {CANCELLED_TAG: reason})
        instance.run_coordinator.cancel_run(run.run_id)
        cancelled[key] = reason
    return cancelled


def abandonment_observations(reasons: dict[str, str]) -> list[AssetObservation]:
    """One observation per abandoned checkpoint partition: the UI's record of why it was never
    evaluated."""
    return [
        AssetObservation(
            asset_key=CHECKPOINTS, partition=key, metadata={"abandoned": reason, "evaluated": False}
        )
        for key, reason in sorted(reasons.items())
    ]
