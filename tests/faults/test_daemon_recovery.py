"""The recovery loop under the real Dagster daemon, with the sensor's memory wiped mid-campaign.

``dagster dev`` (webserver + daemon, the project's ``workspace.yaml`` and ``dagster.yaml``) runs a
``train`` job on packed tokens whose batches at steps ``POISON`` are random tokens. The daemon's
``loss_spike_sensor`` rolls back; the moment its decision appears on the run, the test resets
the sensor's cursor through GraphQL (what an operator's "reset cursor", a lost cursor or a new
sensor version does). The campaign must still end with exactly one resumed run, which completes:
the daemon's run-key check and the decision tags on the runs, not the cursor, carry the
campaign's state.

Recovery first (issue 43): the instance runs one run at a time (``max_concurrent_runs: 1``), so
evaluations of the checkpoints queue behind the training run — the first checkpoint's is
submitted as an operator would, before the spike, and ``eval_sensor`` adds its own — and the
packed tokens have a tokenizer and an identity, so every evaluation really runs. The resume must
start before every evaluation still waiting when it was requested (its run priority: without
it, the queue is first come, first served), no evaluation of a checkpoint the rollback abandoned
may run (cancelled, with the reason in its tags, or never requested), and the evaluations that
run succeed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster_graphql import DagsterGraphQLClient

from pretrain.checkpoint.dcp import parse_checkpoint_key
from pretrain.recovery.policy import Decision
from sensors.recovery.abandoned import CANCELLED_TAG
from tests.helpers.fault_campaign import make_poisoned_packed, with_tokenizer_and_identity
from tests.servers.dagster_server import dagster_dev, submit_train, train_run_config, wait_for

pytestmark = pytest.mark.slow

POISON = [81, 82]
MAX_STEPS = 600  # long enough that the sensor (every 10 s) sees the spike mid-run
RUN_CONFIG = train_run_config(MAX_STEPS)
RESET_CURSOR = """
mutation Reset($selector: SensorSelector!) {
  setSensorCursor(sensorSelector: $selector, cursor: null) {
    __typename
    ... on PythonError { message }
  }
}
"""
TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { ticks(limit: 1) { status } } }
  }
}
"""
TICK_IDS = """
query TickIds($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { ticks(limit: 20) { tickId status } } }
  }
}
"""
SELECTOR = {
    "repositoryLocationName": "app.definitions",
    "repositoryName": "__repository__",
    "sensorName": "loss_spike_sensor",
}
ACTIVE = {DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
          DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING}  # fmt: skip


def tick_ids(client: DagsterGraphQLClient) -> set[str]:
    """Ids of the loss-spike sensor's recent finished ticks."""
    found = client._execute(TICK_IDS, {"selector": SELECTOR})["sensorOrError"]
    ticks = found["sensorState"]["ticks"]
    return {t["tickId"] for t in ticks if t["status"] in ("SKIPPED", "SUCCESS", "FAILURE")}


def sensor_ticked(client: DagsterGraphQLClient) -> bool:
    """The daemon has evaluated the loss-spike sensor at least once (it is up and watching)."""
    try:
        found = client._execute(TICKS, {"selector": SELECTOR})["sensorOrError"]
    except Exception:  # the code location is still loading
        return False
    return bool(found.get("sensorState", {}).get("ticks"))


def finished_evaluations(instance: DagsterInstance) -> list[Any]:
    """``evaluate`` runs that succeeded."""
    runs = instance.get_runs(
        RunsFilter(job_name="eval_reports_job", statuses=[DagsterRunStatus.SUCCESS])
    )
    return list(runs)


def test_rollback_survives_a_sensor_cursor_reset_under_the_daemon(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    make_poisoned_packed(artifacts / "packed_tokens", POISON, num_train=8 * (MAX_STEPS + 8))
    with_tokenizer_and_identity(artifacts)
    (tmp_path / "no_tasks").mkdir()  # evaluations score held-out loss only: seconds each
    env = {"PRETRAIN_EVAL_DIR": str(tmp_path / "no_tasks")}
    queue = {"concurrency": {"runs": {"max_concurrent_runs": 1}}}
    with (
        dagster_dev(tmp_path, artifacts, env=env, instance_settings=queue) as port,
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        client = DagsterGraphQLClient("127.0.0.1", port_number=port)
        wait_for("the sensor's first tick", lambda: sensor_ticked(client), poll_s=1.0)
        first_id = wait_for(
            "the code location", lambda: submit_train(client, RUN_CONFIG), poll_s=1.0
        )
        with DagsterInstance.get() as instance:
            first_checkpoint = "b00-s000000010"
            wait_for(
                "the first checkpoint",
                lambda: first_checkpoint in instance.get_dynamic_partitions("checkpoints"),
                poll_s=0.1,
            )
            queued = client.submit_job_execution(
                "eval_reports_job", tags={"dagster/partition": first_checkpoint}
            )
            assert "pretrain/decision" not in instance.get_run_by_id(first_id).tags

            def tags() -> dict[str, str] | None:
                run = instance.get_run_by_id(first_id)
                return dict(run.tags) if "pretrain/decision" in run.tags else None

            decision = Decision.from_json(wait_for("the decision", tags)["pretrain/decision"])
            reset = client._execute(RESET_CURSOR, {"selector": SELECTOR})
            assert reset["setSensorCursor"]["__typename"] == "Sensor", reset

            def train_runs() -> list[Any]:  # (eval_sensor also requests `evaluate` runs)
                return list(reversed(instance.get_runs(filters=RunsFilter(job_name="train"))))

            def settled() -> bool:
                runs = train_runs()
                return len(runs) >= 2 and not any(r.status in ACTIVE for r in runs)

            wait_for("the campaign to settle", settled, timeout_s=400, poll_s=1.0)
            # two more completed sensor evaluations with nothing running: still nothing requested
            seen = tick_ids(client)
            wait_for(
                "two more sensor ticks",
                lambda: len(tick_ids(client) - seen) >= 2,
                timeout_s=120,
                poll_s=1.0,
            )
            runs = train_runs()
            run_keys = [r.tags.get("dagster/run_key") for r in runs[1:]]
            evaluated = wait_for(
                "an evaluation to finish", lambda: finished_evaluations(instance), timeout_s=180
            )
            evaluations = instance.get_run_records(RunsFilter(job_name="eval_reports_job"))
            resume_record = instance.get_run_records(RunsFilter(run_ids=[runs[-1].run_id]))[0]

    assert decision.action == "rollback" and decision.spike_step in POISON
    assert len(runs) == 2, [
        (r.status.value, r.tags.get("dagster/run_key"), r.tags.get("pretrain/reason")) for r in runs
    ]
    first, resumed = runs
    assert first.status == DagsterRunStatus.CANCELED
    assert resumed.status == DagsterRunStatus.SUCCESS
    assert resumed.tags["pretrain/parent_run_id"] == first.run_id
    assert run_keys == [f"rollback-b00-s{decision.spike_step:09d}-to-b01"]
    # recovery first: every evaluation not yet started when the resume was requested started
    # after it (the queue's priority), though some were queued long before it
    requested_at = resume_record.create_timestamp.timestamp()
    waiting = [r for r in evaluations if not r.start_time or r.start_time > requested_at]
    older = [r for r in waiting if r.create_timestamp.timestamp() < requested_at]
    assert queued in {r.dagster_run.run_id for r in older}, "the queue held no evaluation"
    assert all(r.start_time is None or r.start_time > resume_record.start_time for r in waiting)
    # no evaluation of a checkpoint the rollback abandoned ran after the decision
    for record in evaluations:
        run = record.dagster_run
        branch, step = parse_checkpoint_key(run.tags["dagster/partition"])
        if branch == decision.branch and step > decision.checkpoint_step:
            assert run.status == DagsterRunStatus.CANCELED, run.tags
            assert "abandoned" in run.tags[CANCELLED_TAG]
    assert all(r.dagster_run.status != DagsterRunStatus.FAILURE for r in evaluations), [
        (r.dagster_run.tags["dagster/partition"], r.dagster_run.status) for r in evaluations
    ]
    assert evaluated
    events = (artifacts / "runs" / "b01" / "events.jsonl").read_text().splitlines()
    assert json.loads(events[-1])["event"] == "finished"
    assert (artifacts / "runs" / "b01" / f"step-{MAX_STEPS:08d}").is_dir()
