"""The launcher stops a real torchrun and all its workers; a crash never exposes a half checkpoint."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from resources.launcher import TorchrunLauncher
from resources.process_tree import alive, descendants, stop_process_tree
from tests.helpers.training import make_config, make_packed


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
    tree = {proc.pid} | workers_of(proc)
    for pid in tree:  # a crash: nobody gets to clean up
        os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(pid) for pid in tree)
    assert_only_committed_checkpoints_visible(run_root)


def test_trainer_does_not_inherit_a_wandb_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # a parent that used wandb exports its wandb-core address; a trainer attached to it leaves
    # the run id held after a kill -9, and every resume fails with "run ID ... is in use"
    monkeypatch.setenv("WANDB_SERVICE", "2-1234-tcp-localhost-5678")
    env = TorchrunLauncher(nproc_per_node=2).environment()
    assert "WANDB_SERVICE" not in env and env["PYTHONUNBUFFERED"] == "1"
