"""Start the real ``dagster dev`` (webserver + daemon) from workspace.yaml for a test."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dagster_dev(
    tmp_path: Path,
    artifact_root: Path,
    env: dict[str, str] | None = None,
    instance_settings: dict[str, Any] | None = None,
) -> Iterator[int]:
    """Yields the port of a running ``dagster dev``; stops the whole process group after.

    ``env``: extra variables, e.g. ``PRETRAIN_LAUNCHER=slurm`` and its ``PRETRAIN_LAUNCHER_CONFIG``.
    ``instance_settings``: merged into the project's ``dagster.yaml`` (e.g.
    ``{"concurrency": {"runs": {"max_concurrent_runs": 2}}}``).
    """
    home = tmp_path / "dagster_home"
    (home / ".nux").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "dagster.yaml", home / "dagster.yaml")
    if instance_settings:
        import yaml

        from app.demo import deep_merge

        settings = yaml.safe_load((home / "dagster.yaml").read_text())
        (home / "dagster.yaml").write_text(yaml.safe_dump(deep_merge(settings, instance_settings)))
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PRETRAIN_ROOT": str(artifact_root),
        **(env or {}),
    }
    dagster = Path(sys.executable).with_name("dagster")
    cmd = [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)]
    log_path = tmp_path / "dagster-dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(log_path.read_text()[-3000:]) from None
                    time.sleep(0.5)
            yield port
        finally:
            stop_group(proc)


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a process started in a session of its own, and everything it started: SIGTERM to
    the group, 30 s, then SIGKILL."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_log(tmp_path: Path, run_id: str, last: int = 60) -> str:
    """The last ``last`` entries of a run's event log in the ``dagster_dev`` home under
    ``tmp_path``: what a failing test prints to say where the run was (op logs, engine events,
    the run monitor's own verdicts)."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        entries = instance.all_logs(run_id)[-last:]
    return "\n".join(
        f"{time.strftime('%H:%M:%S', time.gmtime(e.timestamp))} "
        f"{e.dagster_event.event_type_value if e.dagster_event else 'LOG'} "
        f"{e.step_key or ''} {e.user_message[:300]}"
        for e in entries
    )


def wait_for(what: str, predicate: Any, timeout_s: float = 300.0, poll_s: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(poll_s)
    raise TimeoutError(f"timed out waiting for {what}")


def train_run_config(max_steps: int) -> dict[str, Any]:
    """The ``train`` run config of the daemon-driven recovery checks (tiny packed tokens)."""
    config = {
        "run": {"max_steps": max_steps, "resume": "none"},
        "checkpoint": {"every_steps": 10, "healthy_every_steps": 10},
        "data": {"micro_batch_size": 4, "global_batch_sequences": 8},
    }
    return {"ops": {"train_model": {"config": config}}}


def submit_train(client: Any, run_config: dict[str, Any]) -> str | None:
    """Submit ``train`` through GraphQL; None while the code location is still loading."""
    try:
        return client.submit_job_execution("train", run_config=run_config)
    except Exception:
        return None
