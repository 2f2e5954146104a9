"""Recovery time of the loss-spike loop through the real Dagster daemon.

Starts ``dagster dev`` (webserver + daemon, the project's ``workspace.yaml`` and ``dagster.yaml``:
queued runs, ``gpu`` pool of 1, the sensors at their shipped intervals — ``loss_spike_sensor``
every 10 s), launches the ``train`` job on tiny packed tokens whose batches at steps
``POISON`` are random tokens, and measures, from outside:

- ``spike_written``: the spike step's row appears in the offline W&B file (read the same way the
  sensor reads it);
- ``decided``: the training run carries the sensor's rollback decision (run tags);
- ``old_run_ended``: the old run is CANCELED (torchrun and its workers gone);
- ``resumed_started``: the resumed run's trainer reports ``started``;
- ``first_step``: the resumed run's first training step is logged (``metrics.jsonl``).

Recovery time = ``first_step - spike_written``. Work lost = trained steps thrown away: the
last step of the old branch minus the rollback checkpoint's step. Ends with one JSON line.

    .venv/bin/python bench/recovery_time.py
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster import DagsterInstance, DagsterRunStatus  # noqa: E402
from dagster_graphql import DagsterGraphQLClient  # noqa: E402

from pretrain.recovery.policy import Decision  # noqa: E402
from pretrain.recovery.wandb_file import read_history  # noqa: E402
from pretrain.run_files import offline_run_files, wandb_run_id  # noqa: E402
from tests.dagster_server import (  # noqa: E402
    dagster_dev,
    submit_train,
    train_run_config,
    wait_for,
)
from tests.test_fault_injection import make_poisoned_packed  # noqa: E402

POISON = [81, 82]
MAX_STEPS = 1500
RUN_CONFIG = train_run_config(MAX_STEPS)


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


def main() -> dict[str, Any]:
    keep = os.environ.get("RECOVERY_BENCH_DIR")  # keep the run folders (and dagster logs) there
    with contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        artifacts = tmp_path / "artifacts"
        make_poisoned_packed(artifacts / "packed_tokens", POISON, num_train=8 * (MAX_STEPS + 8))
        run_root = artifacts / "runs"
        with dagster_dev(tmp_path, artifacts) as port:
            os.environ["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
            instance = DagsterInstance.get()
            client = DagsterGraphQLClient("127.0.0.1", port_number=port)
            run_id = wait_for(
                "the code location",
                lambda: submit_train(client, RUN_CONFIG),
                timeout_s=120,
                poll_s=1.0,
            )
            t: dict[str, float] = {}
            wait_for(
                "the spike row",
                lambda: POISON[0] in logged_steps(run_root, "b00"),
                timeout_s=600,
                poll_s=0.05,
            )
            t["spike_written"] = time.time()
            tags = wait_for(
                "the decision",
                lambda: (
                    "pretrain/decision" in instance.get_run_by_id(run_id).tags
                    and instance.get_run_by_id(run_id).tags
                ),
            )
            t["decided"] = time.time()
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
            resume_runs = [r for r in instance.get_runs() if r.tags.get("pretrain/requested_by")]
            client.terminate_run(resume_runs[0].run_id)
            wait_for(
                "the resumed run to stop",
                lambda: (
                    instance.get_run_by_id(resume_runs[0].run_id).status
                    == DagsterRunStatus.CANCELED
                ),
            )
    start = t["spike_written"]
    return {
        "bench": "recovery_time",
        "sensor_interval_s": 10,
        "spike_step": decision.spike_step,
        "skip_window": list(decision.skip_window or ()),
        "rollback_checkpoint_step": decision.checkpoint_step,
        "old_branch_last_step": old_last,
        "resumed_first_step": first["step"],
        "work_lost_steps": old_last - decision.checkpoint_step,
        "steps_run_after_spike": old_last - decision.spike_step,
        "resume_runs": len(resume_runs),
        "decision_s": round(t["decided"] - start, 1),
        "old_run_stopped_s": round(t["old_run_ended"] - start, 1),
        "resumed_started_s": round(t["resumed_started"] - start, 1),
        "recovery_s": round(t["first_step"] - start, 1),
        "target_s": 60,
    }


if __name__ == "__main__":
    result = main()
    print(json.dumps(result))
