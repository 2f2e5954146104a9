"""Terminating a training run from Dagster takes torchrun and every worker down first.

A real ``dagster dev`` (webserver + daemon + queued run coordinator + gpu pool) launches the
``train`` job; once a checkpoint is committed the test terminates the run through GraphQL,
as the UI's Terminate button does, and then checks that no process of that run survives,
that the run ended CANCELED, and that only committed checkpoints are visible. It runs once with
the local ``TorchrunLauncher`` and once with the ``SlurmLauncher`` on the tests' one-node Slurm
cluster (``scancel``; the job must have left ``squeue`` too).
"""

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient

from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from resources.process_tree import alive
from tests.helpers.training import make_packed
from tests.servers.dagster_server import dagster_dev, run_log
from tests.servers.training_jobs import processes_naming

RUN_CONFIG = {
    "ops": {
        "train_model": {
            "config": {
                "run": {"max_steps": 100_000, "resume": "none"},
                "checkpoint": {"every_steps": 2},
                "data": {"micro_batch_size": 4, "global_batch_sequences": 8},
                "metrics": {"wandb_mode": "disabled"},
            }
        }
    }
}


def processes_of(run_id: str) -> list[int]:
    """Every live process whose command line names this run's config file."""
    return sorted(processes_naming(f"run-{run_id}.json"))


def where_things_were(tmp_path: Path, run_id: str, pids: list[int], slurm: Any) -> str:
    """What a failure prints: the processes left (with parents and states), the run's event log
    (did the op hear the interrupt, did the run monitor end the run) and the Slurm logs."""
    parts = []
    if pids:
        ps = ["ps", "-o", "pid,ppid,pgid,stat,etime,time,args", "-p", ",".join(map(str, pids))]
        parts.append(subprocess.run(ps, capture_output=True, text=True).stdout)
    parts.append(run_log(tmp_path, run_id))
    if slurm is not None:
        parts.append(f"squeue: {slurm.queue()}\n{slurm.logs()}")
    return "\n".join(parts)


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(params=["torchrun", "slurm"])
def launcher_env(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The ``dagster dev`` variables that pick the launcher, plus the Slurm cluster (or None)."""
    if request.param == "torchrun":
        return {"env": {}, "slurm": None}
    cluster = request.getfixturevalue("slurm")
    fields = cluster.launcher().model_dump()
    return {
        "env": {"PRETRAIN_LAUNCHER": "slurm", "PRETRAIN_LAUNCHER_CONFIG": json.dumps(fields)},
        "slurm": cluster,
    }


@pytest.mark.slow
def test_terminate_from_dagster_stops_every_training_process(
    tmp_path: Path, launcher_env: dict[str, Any]
) -> None:
    artifacts = tmp_path / "artifacts"
    make_packed(artifacts / "packed_tokens", num_train=64)
    with dagster_dev(tmp_path, artifacts, env=launcher_env["env"]) as port:
        client = DagsterGraphQLClient("127.0.0.1", port_number=port)
        deadline = time.monotonic() + 60
        while True:  # the code location may still be loading
            try:
                run_id = client.submit_job_execution("train", run_config=RUN_CONFIG)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        run_root = artifacts / "runs"
        wait_until(lambda: len(ckpt.list_checkpoints(run_root, "b00")) >= 1, 180, "a checkpoint")
        workers = processes_of(run_id)
        assert len(workers) >= 3  # torchrun + 2 workers

        client.terminate_run(run_id)
        slurm = launcher_env["slurm"]
        try:
            wait_until(
                lambda: client.get_run_status(run_id) == DagsterRunStatus.CANCELED, 240, "CANCELED"
            )
        except AssertionError as exc:
            exc.add_note(where_things_were(tmp_path, run_id, processes_of(run_id), slurm))
            raise
        left = processes_of(run_id)
        assert left == [] and not any(alive(pid) for pid in workers), where_things_were(
            tmp_path, run_id, left, slurm
        )
        if slurm is not None:
            assert slurm.queue() == []  # scancel: the job left the queue
        visible = sorted((run_root / "b00").glob("step-*"))
        assert visible and all(storage.is_committed(str(p)) for p in visible)
