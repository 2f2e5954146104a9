"""Fault injection: real torchrun training, a real Dagster instance, the real recovery sensors.

Each test plays a fault against the recovery loop end to end and checks what the campaign did:

1. poisoned data (random tokens at a known step range) → rollback before it, the range skipped,
   training completes near a clean run's loss, and the decision names the poisoned documents;
2. an injected NaN (``run.inject_nan_at_step``) → rollback + LR reduction;
3. ``kill -9`` of every trainer process → run failure → auto-resume → completes, no step
   repeated or missing;
4. two spikes inside the escalation window → the campaign stops and alerts (no endless loop);
5. duplicate ticks and a restarted sensor → no duplicate resume run (in tests 1 and 3).

Every fault plays twice: through local ``torchrun`` and as a Slurm job (``sbatch`` → ``srun
torchrun``) on the tests' one-node cluster (the ``slurm`` fixture; skipped where Slurm cannot run).

The sensors are evaluated by ticks (``build_sensor_context`` / ``build_run_status_sensor_context``
with the real instance and the trainer's real offline W&B files). :class:`Campaign` plays the
daemon and the training op around them: it records each launch as a ``train`` run in the
instance, runs the same ``torchrun -m pretrain.train`` command the op runs on the config
``resolve_train_config`` builds, ends the run the way the op would (SIGTERM to the process tree
when the run is CANCELING, FAILURE on a non-zero exit), launches a requested run once per
``run_key`` as the daemon does, and one run at a time as the ``gpu`` pool does. The daemon itself
is exercised by ``bench/recovery_time.py``, tests/faults/test_training_cancel.py and
tests/faults/test_daemon_recovery.py (a rollback whose sensor cursor is reset mid-campaign).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dagster import (
    AssetCheckEvaluation,
    AssetObservation,
    DagsterInstance,
    DagsterRunStatus,
    instance_for_test,
)

from pretrain.checkpoint import dcp as ckpt
from pretrain.recovery.policy import Decision
from pretrain.recovery.series import metric_rows
from resources.process_tree import alive
from resources.slurm import SlurmLauncher
from tests.helpers.fault_campaign import (
    POLICY,
    Campaign,
    Launch,
    final_loss,
    make_poisoned_packed,
    train_config,
)
from tests.helpers.training import make_packed

pytestmark = pytest.mark.slow


# -- data -------------------------------------------------------------------------------------


# -- the daemon + training op, played around the real sensors ---------------------------------


@pytest.fixture
def instance() -> Any:
    with instance_for_test() as inst:
        yield inst


@pytest.fixture(params=["torchrun", "slurm"])
def slurm_launcher(request: pytest.FixtureRequest) -> SlurmLauncher | None:
    """The same fault through local torchrun (None) and through a Slurm job on the tests'
    one-node cluster (skipped where Slurm cannot run)."""
    if request.param == "torchrun":
        return None
    return request.getfixturevalue("slurm").launcher()


# -- 1 + 5: poisoned data -----------------------------------------------------------------------


def test_poisoned_range_is_rolled_back_skipped_and_named(
    tmp_path: Path, instance: DagsterInstance, slurm_launcher: SlurmLauncher | None
) -> None:
    artifacts = tmp_path / "artifacts"
    poisoned = make_poisoned_packed(artifacts / "packed_tokens", [41, 42])
    campaign = Campaign(instance, artifacts, POLICY, slurm=slurm_launcher)
    campaign.duplicate_ticks = True
    first = campaign.launch(train_config(max_steps=80))
    campaign.drive()

    # one rollback, however many duplicate and restarted ticks saw it
    keys = {r.run_key for r in campaign.requests}
    assert keys == {"rollback-b00-s000000041-to-b01"}
    [b00, b01] = campaign.runs()
    assert (b00.run_id, b00.status, b01.status) == (
        first,
        DagsterRunStatus.CANCELED,
        DagsterRunStatus.SUCCESS,
    )
    decision = Decision.from_json(b01.tags["pretrain/decision"])
    assert (decision.action, decision.kind, decision.spike_step, decision.onset_step) == (
        "rollback",
        "bad_batch",
        41,
        41,
    )
    assert decision.skip_window == (41, 43) and decision.checkpoint_key == "b00-s000000030"
    assert decision.lr_scale == 1.0  # a bad batch: no LR change
    config = b01.run_config["ops"]["train_model"]["config"]["run"]
    assert config["skip_windows"] == [[41, 43]] and config["branch"] == "b01"
    assert config["resume"] == str(campaign.run_root / "b00" / "step-00000030")
    # the decision names the poisoned documents: every document of the window, nothing else
    docs = decision.documents
    assert docs["sources"] == {"poison": len(poisoned)} == {"poison": 16}
    assert docs["num_documents"] == 16 and docs["num_sequences"] == 16
    assert set(docs["doc_ids"]) <= poisoned and docs["doc_ids_shown"] == 10
    assert b01.tags["pretrain/skipped_documents"] == "16"
    assert b00.tags["pretrain/skip_window"] == "41-43"
    # a duplicate evaluation (its result dropped) can see newer rows and decide first; the
    # decision's observation and the health checks then come from it and from the re-request
    evaluations = campaign.results + campaign.dropped
    observations = [
        e for r in evaluations for e in r.asset_events if isinstance(e, AssetObservation)
    ]
    assert observations, "no decision observation"
    for observation in observations:
        assert observation.partition == "b00-s000000030"
        assert observation.metadata["documents"].value["sources"] == {"poison": 16}

    # the resumed branch skipped the range and finished; its checkpoint lineage goes through 30
    [b01_rows] = campaign.history("b01")
    rows = metric_rows(b01_rows)
    assert [r.step for r in rows] == list(range(31, 81))
    assert [r.step for r in rows if r.skipped] == [41, 42]
    assert all(r.loss is not None and r.loss < 3.0 for r in rows if not r.skipped)
    assert campaign.events("b01")[-1]["event"] == "finished"
    meta = ckpt.read_meta(ckpt.latest_checkpoint(campaign.run_root, "b01"))
    assert meta["step"] == 80 and meta["skipped_steps"] == [41, 42]
    # health checks: the checkpoint before the spike passed, the one whose window held it failed
    checks = {
        (e.partition, e.passed)
        for r in evaluations
        for e in r.asset_events
        if isinstance(e, AssetCheckEvaluation)
    }
    assert {("b00-s000000030", True), ("b00-s000000040", False)} <= checks
    assert ckpt.is_healthy(campaign.run_root / "b00" / "step-00000030")

    # the final loss is within tolerance of a clean run on unpoisoned data
    clean_art = tmp_path / "clean"
    make_packed(clean_art / "packed_tokens", num_train=1200)
    clean = Campaign(instance, clean_art, POLICY, slurm=slurm_launcher)
    clean.launch(train_config(max_steps=80, branch="c00"))
    clean.drive()
    clean_rows = clean.history("c00")[-1]  # its last start (a sensor may have resumed it)
    recovered, reference = final_loss(b01_rows), final_loss(clean_rows)
    assert abs(recovered - reference) <= 0.3 * reference + 0.02, (recovered, reference)


# -- 2: NaN ---------------------------------------------------------------------------------------


def test_injected_nan_rolls_back_and_lowers_the_lr(
    tmp_path: Path, instance: DagsterInstance, slurm_launcher: SlurmLauncher | None
) -> None:
    artifacts = tmp_path / "artifacts"
    make_packed(artifacts / "packed_tokens", num_train=1200)
    campaign = Campaign(instance, artifacts, POLICY, slurm=slurm_launcher, inject_nan_at_step=25)
    # healthy_every: the trainer labels finite checkpoints, so pruning cannot race the sensor
    campaign.launch(train_config(max_steps=40, checkpoint_every=5, healthy_every=5))
    campaign.drive()

    [b00, b01] = campaign.runs()
    assert (b00.status, b01.status) == (DagsterRunStatus.CANCELED, DagsterRunStatus.SUCCESS)
    decision = Decision.from_json(b01.tags["pretrain/decision"])
    assert (decision.kind, decision.spike_step, decision.skip_window) == ("nonfinite", 25, (25, 26))
    # the checkpoint at 20 is suspect (the NaN is inside its window): back to 15
    assert decision.checkpoint_key == "b00-s000000015"
    assert decision.lr_scale == pytest.approx(0.8)
    config = b01.run_config["ops"]["train_model"]["config"]["run"]
    assert config["lr_scale"] == pytest.approx(0.8) and config["skip_windows"] == [[25, 26]]
    # b00 went NaN at 25 and stayed NaN; b01 trained 16..40 at 0.8× the LR, all finite
    b00_rows = {r.step: r for r in metric_rows(campaign.history("b00")[0])}
    after = [r for s, r in b00_rows.items() if s >= 25]  # the run may be stopped right at 25
    assert after and all(np.isnan(r.loss) for r in after)
    b01_rows = {r.step: r for r in metric_rows(campaign.history("b01")[0])}
    assert sorted(b01_rows) == list(range(16, 41)) and b01_rows[25].skipped
    assert all(r.finite and r.loss is not None for s, r in b01_rows.items() if s != 25)
    for step in range(16, 25):
        assert b01_rows[step].lr == pytest.approx(0.8 * b00_rows[step].lr)
    assert campaign.events("b01")[-1]["event"] == "finished"


# -- 3 + 5: kill -9 ------------------------------------------------------------------------------


def kill_after_checkpoint(step: int) -> Any:
    def on_step(campaign: Campaign, launch: Launch) -> None:
        if launch.terminated or launch.branch != "b00" or campaign.finished:
            return
        # kill once a checkpoint at ``step`` is committed and W&B has flushed a few steps past it
        # (a kill -9 loses what W&B had not flushed: the test is about the training steps)
        # and well before the next checkpoint (every 20 steps here), so no checkpoint commits
        # between this check and the kill (W&B trails the trainer, more so on a loaded machine)
        logged = [r["_step"] for files in campaign.history("b00") for r in files if "_step" in r]
        committed = ckpt.list_checkpoints(campaign.run_root, "b00")
        latest = max((ckpt.step_of(c) for c in committed), default=None)
        if logged and latest is not None and latest >= step and 3 <= max(logged) - latest <= 12:
            procs = launch.job.pids()
            for pid in procs:
                os.kill(pid, signal.SIGKILL)
            launch.terminated = True
            launch.job.wait()
            deadline = time.monotonic() + 30  # SIGKILL is asynchronous for the workers
            while any(alive(pid) for pid in procs) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not any(alive(pid) for pid in procs)

    return on_step


def test_kill9_auto_resumes_once_without_repeating_or_missing_steps(
    tmp_path: Path, instance: DagsterInstance, slurm_launcher: SlurmLauncher | None
) -> None:
    artifacts = tmp_path / "artifacts"
    make_packed(artifacts / "packed_tokens", num_train=1200)
    campaign = Campaign(instance, artifacts, POLICY, slurm=slurm_launcher)
    campaign.duplicate_ticks = True  # the failure sensor sees the failure twice, too
    crashed = campaign.launch(train_config(max_steps=60, checkpoint_every=20))
    campaign.drive(on_step=kill_after_checkpoint(20))

    assert {r.run_key for r in campaign.requests} == {f"crash-resume-{crashed}"}
    assert len(campaign.requests) == 2  # evaluated twice, launched once
    [first, resumed] = campaign.runs()
    assert (first.status, resumed.status) == (DagsterRunStatus.FAILURE, DagsterRunStatus.SUCCESS)
    assert resumed.tags["pretrain/auto_resume_attempt"] == "1"
    start = int(resumed.tags["pretrain/resume_checkpoint_step"])
    assert start >= 20 and start % 20 == 0
    # per-step metrics across both starts of b00: the crashed run logged 1..k, the resumed run
    # (start+1)..60; together every step once, and the re-done steps reproduce the same losses
    crashed_rows, resumed_rows = campaign.history("b00")
    crashed_steps = [r["_step"] for r in crashed_rows if "train/loss" in r]
    resumed_steps = [r["_step"] for r in resumed_rows if "train/loss" in r]
    assert crashed_steps == list(range(1, crashed_steps[-1] + 1)) and crashed_steps[-1] >= start
    assert resumed_steps == list(range(start + 1, 61))
    redone = {r["_step"]: r["train/loss"] for r in crashed_rows if r.get("_step", 0) > start}
    again = {r["_step"]: r["train/loss"] for r in resumed_rows if r["_step"] in redone}
    assert again == redone  # deterministic replay: the same step, the same loss
    assert [r.step for r in metric_rows(crashed_rows + resumed_rows)] == list(range(1, 61))
    assert campaign.events("b00")[-1]["event"] == "finished"


# -- 4: escalation ------------------------------------------------------------------------------


def test_second_spike_in_window_stops_the_campaign(
    tmp_path: Path, instance: DagsterInstance, slurm_launcher: SlurmLauncher | None
) -> None:
    artifacts = tmp_path / "artifacts"
    make_poisoned_packed(artifacts / "packed_tokens", [31, 46])
    policy = {**POLICY, "max_rollbacks_in_window": 1}
    campaign = Campaign(instance, artifacts, policy, slurm=slurm_launcher)
    campaign.launch(train_config(max_steps=80))
    campaign.drive()
    for _ in range(3):  # later ticks stay idle: no endless loop
        campaign.tick()

    assert {r.run_key for r in campaign.requests} == {"rollback-b00-s000000031-to-b01"}
    [b00, b01] = campaign.runs()
    assert (b00.status, b01.status) == (DagsterRunStatus.CANCELED, DagsterRunStatus.CANCELED)
    assert (b01.tags["pretrain/action"], b01.tags["pretrain/spike_step"]) == ("stop", "46")
    stop = Decision.from_json(b01.tags["pretrain/decision"])
    assert stop.kind == "escalation" and "stopping for a human to decide" in stop.reason
    skips = [r.skip_reason.skip_message for r in campaign.results if r.skip_reason]
    stops = [m for m in skips if m.startswith("STOPPED:")]
    assert len(stops) == 1 and "1 rollbacks already within" in stops[0]
    assert json.loads(campaign.cursor)["stopped"] is not None  # idle until a human relaunches
    assert campaign.results[-1].skip_reason.skip_message == "no train run in progress"
    failed = [
        e
        for r in campaign.results
        for e in r.asset_events
        if isinstance(e, AssetCheckEvaluation) and e.severity.value == "ERROR"
    ]
    [alert] = failed
    assert not alert.passed and alert.description.startswith("campaign STOPPED")
    assert alert.partition.startswith("b01-s")
