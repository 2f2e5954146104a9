"""Recovery first (issue 43): evaluations never queue ahead of a resume, and a rollback's
abandoned checkpoints are never evaluated.

Pure: :func:`pretrain.recovery.evaluations.plan_evaluations` (per-branch limit, abandonment) and
the cursor's queue. On a real SQLite instance with Dagster's queued run coordinator: one
``eval_sensor`` tick after a rollback cancels the queued evaluations of abandoned checkpoints
(the reason in their tags), records why on their partitions, and holds a branch's burst of
checkpoints to one evaluation at a time; the resume request carries the run priority that the
daemon's queue sorts by. Run::

    .venv/bin/pytest -q tests/dagster/test_eval_scheduling.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import (
    AssetMaterialization,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
)

from foundation.partitions import checkpoint_partitions
from pretrain.errors import ConfigError, DataError
from pretrain.recovery.evaluations import EvalQueue, abandonment, plan_evaluations
from pretrain.recovery.policy import Decision, PolicyConfig
from sensors.recovery.abandoned import CANCELLED_TAG, EVAL_JOB
from sensors.recovery.training_runs import PRIORITY_TAG, RESUME_PRIORITY, resume_request
from tests.helpers.checkpoints import committed_key, eval_ticks, sqlite_instance

ROLLBACK = Decision(
    action="rollback",
    reason="loss spike",
    branch="b00",
    spike_step=81,
    checkpoint_step=60,
    checkpoint_key="b00-s000000060",
    new_branch="b01",
)


def key(branch: str, step: int) -> str:
    return f"{branch}-s{step:09d}"


def test_checkpoints_after_the_rollback_target_are_abandoned_and_the_rest_wait_their_turn() -> None:
    pending = [(key("b00", s), f"v{s}") for s in (50, 60, 70, 80)] + [
        (key("b01", s), f"w{s}") for s in (70, 80)
    ]
    plan = plan_evaluations(pending, in_flight={}, rollbacks=[ROLLBACK], limit=1)
    assert plan.requests == ((key("b00", 50), "v50"), (key("b01", 70), "w70"))
    assert plan.waiting == ((key("b00", 60), "v60"), (key("b01", 80), "w80"))
    assert sorted(plan.abandoned) == [key("b00", 70), key("b00", 80)]
    assert "rolled branch b00 back to b00-s000000060" in plan.abandoned[key("b00", 70)]
    assert "continued on b01" in plan.abandoned[key("b00", 70)]
    # a branch already at its limit gets nothing more; a larger limit lets two through
    busy = plan_evaluations(pending, in_flight={"b00": 1}, rollbacks=[ROLLBACK], limit=1)
    assert [k for k, _ in busy.requests] == [key("b01", 70)]
    two = plan_evaluations(pending, in_flight={}, rollbacks=[], limit=2)
    assert [k for k, _ in two.requests] == [
        key("b00", 50),
        key("b00", 60),
        key("b01", 70),
        key("b01", 80),
    ]
    # the rollback target itself and a branch without a rollback stay evaluated
    assert abandonment(key("b00", 60), [ROLLBACK]) is None
    assert abandonment(key("b01", 900), [ROLLBACK]) is None
    lr_cut = Decision(action="reduce_lr", reason="plateau", branch="b00", checkpoint_step=10)
    assert abandonment(key("b00", 70), [lr_cut]) is None  # same branch, nothing thrown away


def test_the_queue_survives_its_cursor_and_reads_the_old_one() -> None:
    queue = EvalQueue().add([(key("b00", 10), "a"), (key("b00", 20), None)], after=7)
    queue = queue.add([(key("b00", 10), "b")], after=9)  # re-made: its new version, at the end
    assert EvalQueue.from_json(queue.to_json()) == queue
    assert queue.pending == ((key("b00", 20), None), (key("b00", 10), "b"))
    assert EvalQueue.from_json("123") == EvalQueue(after=123)  # the cursor's first version
    assert EvalQueue.from_json(None) == EvalQueue()
    with pytest.raises(DataError, match="not an evaluation queue"):
        EvalQueue.from_json('{"pending": 3}')
    with pytest.raises(ConfigError, match="evaluations_per_branch"):
        PolicyConfig(evaluations_per_branch=0)


@pytest.fixture
def instance(tmp_path: Path):
    with sqlite_instance(tmp_path) as inst:
        yield inst


def commit(instance: DagsterInstance, root: Path, ckpt: str) -> None:
    """A committed checkpoint folder and its ``checkpoints[key]`` materialization."""
    path = committed_key(root, ckpt)
    instance.add_dynamic_partitions(checkpoint_partitions.name, [ckpt])
    instance.report_runless_asset_event(
        AssetMaterialization(asset_key="checkpoints", partition=ckpt, metadata={"path": str(path)})
    )


def started_run(instance: DagsterInstance, job: str, tags: dict[str, str]) -> DagsterRun:
    """A run as the instance holds it once launched (a QUEUED one needs a code location's
    origin: the daemon test, ``tests/faults/test_daemon_recovery.py``, cancels those)."""
    return instance.add_run(DagsterRun(job_name=job, status=DagsterRunStatus.STARTED, tags=tags))


def test_a_tick_after_a_rollback_cancels_abandoned_evaluations_and_holds_back_a_burst(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    root = tmp_path / "artifacts"
    _, tick = eval_ticks(instance, root)
    for step in (50, 60, 70, 80):
        commit(instance, root, key("b00", step))
    first = tick(None)  # a burst of four: one evaluation, three wait
    assert [r.partition_key for r in first.run_requests] == [key("b00", 50)]
    assert [k for k, _ in EvalQueue.from_json(first.cursor).pending] == [
        key("b00", 60), key("b00", 70), key("b00", 80)
    ]  # fmt: skip
    evaluating = started_run(instance, EVAL_JOB, {"dagster/partition": key("b00", 50)})
    busy = tick(first.cursor)
    assert busy.run_requests == []  # b00 has its one evaluation in flight
    assert "3 checkpoint(s) wait for their branch's evaluation" in busy.skip_reason.skip_message
    # the 70 is being evaluated (an operator asked); then the spike sensor rolls back to 60
    stale = started_run(instance, EVAL_JOB, {"dagster/partition": key("b00", 70)})
    started_run(
        instance, "train", {**ROLLBACK.run_tags(), "pretrain/stopped_by": "loss_spike_sensor"}
    )
    instance.report_run_failed(evaluating)  # 50 is done with (its result does not matter here)
    after = tick(first.cursor)
    assert [r.partition_key for r in after.run_requests] == [key("b00", 60)]
    cancelled = instance.get_run_by_id(stale.run_id)
    assert cancelled.status == DagsterRunStatus.CANCELING  # no process here to stop
    assert "rolled branch b00 back to b00-s000000060" in cancelled.tags[CANCELLED_TAG]
    observed = {e.partition: e.metadata["abandoned"].value for e in after.asset_events}
    assert sorted(observed) == [key("b00", 70), key("b00", 80)]
    assert EvalQueue.from_json(after.cursor).pending == ()  # nothing left to wait for
    # the new branch's checkpoints are evaluated as usual
    commit(instance, root, key("b01", 70))
    assert [r.partition_key for r in tick(after.cursor).run_requests] == [key("b01", 70)]


def test_a_resume_request_goes_ahead_of_queued_evaluations() -> None:
    """Dagster's queue dequeues by ``dagster/priority`` (higher first), then by age."""
    run = DagsterRun(
        job_name="train",
        run_config={"ops": {"train_model": {"config": {"run": {"max_steps": 10}}}}},
    )
    request = resume_request(
        run=run, decision=ROLLBACK, resume="/r/b00/step-00000060", branch="b01",
        run_key="rollback-b00-s000000081-to-b01", sensor="loss_spike_sensor",
    )  # fmt: skip
    assert int(request.tags[PRIORITY_TAG]) == RESUME_PRIORITY > 0
