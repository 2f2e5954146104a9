"""Rollback decisions as run storage holds them: what the quarantine of each one reads.

A rollback by ``loss_spike_sensor`` tags the stopped ``train`` run with its decision
(``pretrain/decision``) and ``pretrain/stopped_by``; that run's resolved trainer config
(``<run_root>/<branch>/run-<run id>.json``) names the packed data and the batch plan. So the
decision id (``<branch>-s<spike step>-to-<new branch>``, the rollback's run key without the
prefix) is enough to find everything the quarantine needs, from a sensor tick or from a
materialization launched by hand::

    records = rollback_decisions(instance)           # {decision id: (stopped run, Decision)}
    spike_rollbacks(instance)                        # [(stopped run, Decision)], every rollback
    record = skip_record(decision_id, run, decision, run_root, documents_uri)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from dagster import DagsterInstance, DagsterRun, RunsFilter

from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from pretrain.errors import ConfigError, DataError
from pretrain.quarantine import SkipRecord
from pretrain.recovery.documents import plan_of
from pretrain.recovery.policy import Decision

SPIKE_SENSOR, STOPPED_BY_TAG, DECISION_TAG = (
    "loss_spike_sensor",
    "pretrain/stopped_by",
    "pretrain/decision",
)
MAX_RUNS = 1000


def decision_id(decision: Decision) -> str:
    """``b00-s000000041-to-b01``: unique per rollback (a branch spikes at a step once)."""
    return f"{decision.branch}-s{decision.spike_step:09d}-to-{decision.new_branch}"


def read_decision(run: DagsterRun) -> Decision:
    """The recovery decision tagged on ``run``; ``DataError`` naming the run when the tag is
    missing or is not a decision a recovery sensor wrote."""
    text = run.tags.get(DECISION_TAG)
    try:
        if text is None:
            raise DataError("missing")
        return Decision.from_json(text)
    except DataError as exc:
        raise DataError(
            f"run {run.run_id}: tag {DECISION_TAG} {exc}; skipped (restore the JSON the recovery "
            "sensor wrote, or remove the run if it is not a training run)"
        ) from exc


def spike_rollbacks(
    instance: DagsterInstance, warn: Callable[[str], None] | None = None
) -> list[tuple[DagsterRun, Decision]]:
    """Every rollback the loss-spike sensor took, with the run it stopped, newest first. A run
    whose decision tag cannot be read is skipped and reported through ``warn`` (default:
    logged), so one malformed tag does not hide every other rollback."""
    runs = instance.get_runs(
        RunsFilter(job_name="train", tags={STOPPED_BY_TAG: SPIKE_SENSOR}), limit=MAX_RUNS
    )
    found: list[tuple[DagsterRun, Decision]] = []
    for run in runs:
        try:
            decision = read_decision(run)
        except DataError as exc:
            (warn or logging.getLogger(__name__).warning)(str(exc))
            continue
        if decision.action == "rollback":
            found.append((run, decision))
    return found


def rollback_decisions(
    instance: DagsterInstance, warn: Callable[[str], None] | None = None
) -> dict[str, tuple[DagsterRun, Decision]]:
    """Every rollback the loss-spike sensor took that skipped data, by decision id."""
    return {
        decision_id(decision): (run, decision)
        for run, decision in spike_rollbacks(instance, warn)
        if decision.skip_window and decision.checkpoint_path
    }


def skip_record(
    key: str, run: DagsterRun, decision: Decision, run_root: str, documents_uri: str | None
) -> SkipRecord:
    """What the quarantine of decision ``key`` reads: the stopped run's packed data and batch
    plan, the checkpoint rolled back to, and a checkpoint of the spiking branch past the window
    (when it wrote one before it was stopped)."""
    config_path = storage.join(run_root, decision.branch, f"run-{run.run_id}.json")
    if not storage.exists(config_path):
        raise ConfigError(
            f"decision {key}: no trainer config {config_path}; the quarantine needs the packed "
            "data and batch plan the stopped run used (written by the training op)"
        )
    config = json.loads(storage.read_bytes(config_path))
    assert decision.skip_window and decision.checkpoint_path and decision.spike_step is not None
    after = [
        str(p)
        for p in ckpt.list_checkpoints(run_root, decision.branch)
        if ckpt.step_of(p) >= decision.skip_window[1]
    ]
    return SkipRecord(
        decision_id=key,
        branch=decision.branch,
        window=decision.skip_window,
        spike_step=decision.spike_step,
        packed_dir=config["data"]["packed_dir"],
        plan=plan_of(config),
        healthy_checkpoint=decision.checkpoint_path,
        after_checkpoint=after[-1] if after else None,
        documents_uri=documents_uri,
    )
