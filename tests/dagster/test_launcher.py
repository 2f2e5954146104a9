"""The launcher stops a real torchrun and all its workers; a crash never exposes a half checkpoint."""

import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from resources.kubernetes import KubernetesLauncher
from resources.launcher import TorchrunLauncher
from resources.launching import (
    DAGSTER_STEP_CLEANUP_S,
    cancel_timeout_problem,
    stopping_on_interrupt,
)
from resources.process_tree import alive, descendants, stop_process_tree
from resources.slurm import SlurmLauncher
from tests.helpers.training import kill_tree, make_config, make_packed

ROOT = Path(__file__).resolve().parents[2]


def start_long_run(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    packed = make_packed(tmp_path / "packed", num_train=64)
    run_root = tmp_path / "runs"
    cfg = make_config(
        packed, run_root, max_steps=100_000, schedule_steps=100_000, every=2, keep_last=1000
    )
    config_path = tmp_path / "run.json"
    config_path.write_text(cfg.to_json())
    launcher = TorchrunLauncher(nproc_per_node=2)
    proc = subprocess.Popen(
        launcher.command(str(config_path), event_sink=None),
        env=launcher.environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc, run_root


def wait_for_checkpoints(run_root: Path, proc: subprocess.Popen, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(ckpt.list_checkpoints(run_root, "b00")) < count:
        assert proc.poll() is None, "torchrun exited early"
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.2)


def assert_only_committed_checkpoints_visible(run_root: Path) -> None:
    visible = sorted((run_root / "b00").glob("step-*"))
    assert visible and all(storage.is_committed(str(p)) for p in visible)
    latest = ckpt.latest_checkpoint(run_root, "b00")
    model = ckpt.load_consolidated_model(str(latest))
    assert ckpt.weights_fingerprint(model) == ckpt.read_meta(latest)["weights_fingerprint"]


def workers_of(proc: subprocess.Popen) -> set[int]:
    found = descendants(proc.pid)
    assert len(found) >= 2, "expected torchrun to have started 2 workers"
    return found


@pytest.mark.slow
def test_sigterm_stops_torchrun_and_every_worker(tmp_path: Path) -> None:
    proc, run_root = start_long_run(tmp_path)
    wait_for_checkpoints(run_root, proc, 2)
    workers = workers_of(proc)
    stop_process_tree(proc, term_timeout_s=90, kill_timeout_s=10)
    assert proc.returncode is not None
    assert not any(alive(pid) for pid in workers)
    assert_only_committed_checkpoints_visible(run_root)


@pytest.mark.slow
def test_sigkill_escalation_reaches_workers_in_their_own_sessions(tmp_path: Path) -> None:
    proc, run_root = start_long_run(tmp_path)
    wait_for_checkpoints(run_root, proc, 2)
    workers = workers_of(proc)
    assert {os.getsid(pid) for pid in workers} != {os.getsid(proc.pid)}  # why killpg is not enough
    stop_process_tree(proc, term_timeout_s=0, kill_timeout_s=15)  # straight to SIGKILL
    assert not alive(proc.pid) and not any(alive(pid) for pid in workers)
    assert_only_committed_checkpoints_visible(run_root)


@pytest.mark.slow
def test_crash_mid_run_leaves_no_half_written_checkpoint(tmp_path: Path) -> None:
    proc, run_root = start_long_run(tmp_path)
    wait_for_checkpoints(run_root, proc, 3)
    kill_tree(proc, {proc.pid} | workers_of(proc))  # a crash: nobody gets to clean up
    assert_only_committed_checkpoints_visible(run_root)


def test_trainer_does_not_inherit_a_wandb_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # a parent that used wandb exports its wandb-core address; a trainer attached to it leaves
    # the run id held after a kill -9, and every resume fails with "run ID ... is in use"
    monkeypatch.setenv("WANDB_SERVICE", "2-1234-tcp-localhost-5678")
    env = TorchrunLauncher(nproc_per_node=2).environment()
    assert "WANDB_SERVICE" not in env and env["PYTHONUNBUFFERED"] == "1"


def test_the_shipped_cancel_timeout_outlasts_every_launchers_stop() -> None:
    # run monitoring marks a run still stopping after cancel_timeout_seconds CANCELED, and the
    # gpu pool then starts the next run while the old job may still be on the GPUs
    shipped = yaml.safe_load((ROOT / "config" / "dagster.yaml").read_text())["run_monitoring"]
    for launcher in (TorchrunLauncher(), SlurmLauncher(), KubernetesLauncher()):
        stop_s = launcher.longest_stop_s()
        assert cancel_timeout_problem(shipped["cancel_timeout_seconds"], stop_s) is None, launcher
    # Dagster's own default, 180 s, is too short for Slurm's 240 s SIGTERM window: said, with
    # the value to set
    slurm_stop_s = SlurmLauncher().longest_stop_s()
    assert slurm_stop_s >= 240
    problem = cancel_timeout_problem(180, slurm_stop_s)
    assert problem and f"at least {slurm_stop_s + DAGSTER_STEP_CLEANUP_S:.0f}" in problem


class FailingLog:
    """A run log whose writes fail, as one can when an interrupt lands inside a storage write."""

    def warning(self, message: str) -> None:
        raise RuntimeError("database is locked")


def test_an_interrupted_wait_stops_the_job_before_any_log_write(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stopped = []
    context = SimpleNamespace(log=FailingLog())
    with pytest.raises(RuntimeError, match="database is locked") as raised:
        with stopping_on_interrupt(context, "job 7", lambda: stopped.append("job 7")):  # type: ignore[arg-type]
            raise KeyboardInterrupt
    assert stopped == ["job 7"]  # the stop happened although the log write then failed
    assert isinstance(raised.value.__context__, KeyboardInterrupt)
    assert "interrupted: stopping job 7" in capsys.readouterr().err
