"""Recovery time of the loss-spike loop through the real Dagster daemon, as a campaign runs it.

Starts ``dagster dev`` (webserver + daemon, the project's ``workspace.yaml`` and ``dagster.yaml``:
queued runs, ``gpu`` pool of 1, the sensors at their shipped intervals — ``loss_spike_sensor``
every 10 s, ``eval_sensor`` every 15 s), launches the ``train`` job on tiny packed tokens whose
batches at steps ``POISON`` are random tokens, and measures, from outside:

- ``spike_written``: the spike step's row appears in the offline W&B file (read the same way the
  sensor reads it);
- ``decided``: the training run carries the sensor's rollback decision (run tags);
- ``old_run_ended``: the old run is CANCELED (torchrun and its workers gone);
- ``resumed_started``: the resumed run's trainer reports ``started``;
- ``first_step``: the resumed run's first training step is logged (``metrics.jsonl``).

The packed tokens have a tokenizer and an identity (as the corpus assets leave them), so every
``evaluate`` run that ``eval_sensor`` requests for the checkpoints really scores them (held-out
loss and bits per byte; no task files: ``PRETRAIN_EVAL_DIR`` is an empty folder). When the
decision appears, the bench records what the instance's queue held; after the resumed run's
first step it stops that run, waits for the evaluations in flight and counts how they ended
(an abandoned checkpoint's evaluation is cancelled or never requested).

Recovery time = ``first_step - spike_written``. Work lost = trained steps thrown away: the
last step of the old branch minus the rollback checkpoint's step. Three runs by default; prints
each run's JSON, then one JSON line with the median of each phase.

    .venv/bin/python bench/recovery_time.py [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter  # noqa: E402
from dagster_graphql import DagsterGraphQLClient  # noqa: E402

from pretrain.checkpoint.dcp import parse_checkpoint_key  # noqa: E402
from pretrain.recovery.policy import Decision  # noqa: E402
from pretrain.recovery.wandb_file import read_history  # noqa: E402
from pretrain.run_files import offline_run_files, wandb_run_id  # noqa: E402
from tests.helpers.fault_campaign import (  # noqa: E402
    make_poisoned_packed,
    with_tokenizer_and_identity,
)
from tests.servers.dagster_server import (  # noqa: E402
    dagster_dev,
    submit_train,
    train_run_config,
    wait_for,
)

POISON = [81, 82]
MAX_STEPS = 1500
RUN_CONFIG = train_run_config(MAX_STEPS)
ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]
PHASES = ("decision_s", "old_run_stopped_s", "resumed_started_s", "recovery_s")


def logged_steps(run_root: Path, branch: str) -> list[int]:
    steps: list[int] = []
    for path in offline_run_files(run_root, wandb_run_id(run_root, branch)):
        steps += [r["_step"] for r in read_history(path)[0] if "train/loss" in r]
    return steps


def first_metrics_row(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("loss") is not None:
            return row
    return None


def queue_contents(instance: DagsterInstance) -> list[dict[str, str]]:
    """The runs not yet finished, oldest first: job, partition, status, priority."""
    runs = reversed(instance.get_runs(RunsFilter(statuses=ACTIVE)))
    return [
        {
            "job": r.job_name,
            "partition": r.tags.get("dagster/partition", ""),
            "status": r.status.value,
            "priority": r.tags.get("dagster/priority", "0"),
        }
        for r in runs
    ]


def evaluation_outcomes(instance: DagsterInstance, decision: Decision) -> dict[str, int]:
    """How the ``evaluate`` runs ended, abandoned checkpoints (after the rollback target on the
    old branch) counted apart."""
    counts: dict[str, int] = {}
    for run in instance.get_runs(RunsFilter(job_name="eval_reports_job")):
        branch, step = parse_checkpoint_key(run.tags["dagster/partition"])
        abandoned = branch == decision.branch and step > (decision.checkpoint_step or 0)
        name = ("abandoned_" if abandoned else "") + run.status.value.lower()
        counts[name] = counts.get(name, 0) + 1
    return counts


def one_run(tmp_path: Path) -> dict[str, Any]:
    artifacts = tmp_path / "artifacts"
    make_poisoned_packed(artifacts / "packed_tokens", POISON, num_train=8 * (MAX_STEPS + 8))
    with_tokenizer_and_identity(artifacts)
    (tmp_path / "no_tasks").mkdir()
    run_root = artifacts / "runs"
    env = {"PRETRAIN_EVAL_DIR": str(tmp_path / "no_tasks")}
    with dagster_dev(tmp_path, artifacts, env=env) as port:
        os.environ["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
        instance = DagsterInstance.get()
        client = DagsterGraphQLClient("127.0.0.1", port_number=port)
        run_id = wait_for(
            "the code location", lambda: submit_train(client, RUN_CONFIG), timeout_s=120, poll_s=1.0
        )
        t: dict[str, float] = {}
        wait_for(
            "the spike row",
            lambda: POISON[0] in logged_steps(run_root, "b00"),
            timeout_s=600,
            poll_s=0.05,
        )
        t["spike_written"] = time.time()

        def decided() -> dict[str, str] | None:
            tags = instance.get_run_by_id(run_id).tags
            return dict(tags) if "pretrain/decision" in tags else None

        tags = wait_for("the decision", decided, poll_s=0.05)
        t["decided"] = time.time()
        queue = queue_contents(instance)
        decision = Decision.from_json(tags["pretrain/decision"])
        wait_for(
            "the old run to end",
            lambda: instance.get_run_by_id(run_id).status == DagsterRunStatus.CANCELED,
        )
        t["old_run_ended"] = time.time()
        branch = decision.new_branch
        events = run_root / branch / "events.jsonl"
        wait_for("the resumed run to start", lambda: events.is_file() and events.read_text())
        t["resumed_started"] = time.time()
        first = wait_for(
            "the resumed run's first step",
            lambda: first_metrics_row(run_root / branch / "metrics.jsonl"),
            poll_s=0.05,
        )
        t["first_step"] = time.time()
        old_events = [
            json.loads(line)
            for line in (run_root / "b00" / "events.jsonl").read_text().splitlines()
        ]
        old_last = max(e["step"] for e in old_events if "step" in e)
        resumed = instance.get_runs(
            RunsFilter(job_name="train", tags={"pretrain/parent_run_id": run_id})
        )
        client.terminate_run(resumed[0].run_id)
        wait_for(
            "the resumed run to stop",
            lambda: instance.get_run_by_id(resumed[0].run_id).status == DagsterRunStatus.CANCELED,
        )
        wait_for(
            "the evaluations in flight",
            lambda: not instance.get_runs(RunsFilter(job_name="eval_reports_job", statuses=ACTIVE)),
            timeout_s=600,
            poll_s=1.0,
        )
        outcomes = evaluation_outcomes(instance, decision)
    start = t["spike_written"]
    return {
        "spike_step": decision.spike_step,
        "skip_window": list(decision.skip_window or ()),
        "rollback_checkpoint_step": decision.checkpoint_step,
        "old_branch_last_step": old_last,
        "resumed_first_step": first["step"],
        "work_lost_steps": old_last - decision.checkpoint_step,
        "resume_runs": len(resumed),
        "decision_s": round(t["decided"] - start, 1),
        "old_run_stopped_s": round(t["old_run_ended"] - start, 1),
        "resumed_started_s": round(t["resumed_started"] - start, 1),
        "recovery_s": round(t["first_step"] - start, 1),
        "queue_at_decision": queue,
        "evaluations": outcomes,
    }


def main(runs: int) -> dict[str, Any]:
    keep = os.environ.get("RECOVERY_BENCH_DIR")  # keep the run folders (and dagster logs) there
    results = []
    for i in range(runs):
        with contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / f"run{i}"
            folder.mkdir(parents=True)
            result = one_run(folder)
        print(json.dumps({"run": i + 1, **result}), flush=True)
        results.append(result)
    evaluations: dict[str, int] = {}
    for result in results:
        for name, n in result["evaluations"].items():
            evaluations[name] = evaluations.get(name, 0) + n
    return {
        "bench": "recovery_time",
        "runs": runs,
        "sensor_interval_s": 10,
        **{f"median_{p}": statistics.median(r[p] for r in results) for p in PHASES},
        "recovery_s_each": [r["recovery_s"] for r in results],
        "evaluations": evaluations,
        "target_s": 30,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    print(json.dumps(main(parser.parse_args().runs)))
