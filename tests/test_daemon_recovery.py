"""The recovery loop under the real Dagster daemon, with the sensor's memory wiped mid-campaign.

``dagster dev`` (webserver + daemon, the project's ``workspace.yaml`` and ``dagster.yaml``) runs a
``train`` job on packed tokens whose batches at steps ``POISON`` are random tokens. The daemon's
``loss_spike_sensor`` rolls back; the moment its decision appears on the run, the test resets
the sensor's cursor through GraphQL (what an operator's "reset cursor", a lost cursor or a new
sensor version does). The campaign must still end with exactly one resumed run, which completes:
the daemon's run-key check and the decision tags on the runs, not the cursor, carry the
campaign's state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster_graphql import DagsterGraphQLClient

from pretrain.recovery.policy import Decision
from tests.dagster_server import dagster_dev, submit_train, train_run_config, wait_for
from tests.helpers.fault_campaign import make_poisoned_packed

pytestmark = pytest.mark.slow

POISON = [31, 32]
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
    "repositoryLocationName": "pretrain_assets.definitions",
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


def test_rollback_survives_a_sensor_cursor_reset_under_the_daemon(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    make_poisoned_packed(artifacts / "packed_tokens", POISON, num_train=8 * (MAX_STEPS + 8))
    with dagster_dev(tmp_path, artifacts) as port, pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        client = DagsterGraphQLClient("127.0.0.1", port_number=port)
        wait_for("the sensor's first tick", lambda: sensor_ticked(client), poll_s=1.0)
        first_id = wait_for(
            "the code location", lambda: submit_train(client, RUN_CONFIG), poll_s=1.0
        )
        with DagsterInstance.get() as instance:

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

    assert decision.action == "rollback" and decision.spike_step in POISON
    assert len(runs) == 2, [r.tags for r in runs]
    first, resumed = runs
    assert first.status == DagsterRunStatus.CANCELED
    assert resumed.status == DagsterRunStatus.SUCCESS
    assert resumed.tags["pretrain/parent_run_id"] == first.run_id
    assert run_keys == [f"rollback-b00-s{decision.spike_step:09d}-to-b01"]
    events = (artifacts / "runs" / "b01" / "events.jsonl").read_text().splitlines()
    assert json.loads(events[-1])["event"] == "finished"
    assert (artifacts / "runs" / "b01" / f"step-{MAX_STEPS:08d}").is_dir()
