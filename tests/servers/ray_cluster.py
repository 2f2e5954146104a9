"""A real two-node Ray cluster on this machine: a head and one worker node, separate processes.

Each node is ``ray start --block`` in a session of its own, with the venv's ``bin`` first on
PATH (a Ray job's entrypoint, ``dagster api execute_step``, runs under ``/bin/sh`` with the
node's PATH), small CPU/memory caps, its own ports (two raylets on one host must not share
agent or metrics ports) and the dashboard/job API on 127.0.0.1. Nodes are stopped by PID
(their process trees, followed through /proc), never with ``ray stop``, which would stop every
Ray process on the machine::

    with ray_cluster(tmp_path, head_cpus=1, worker_cpus=1) as cluster:
        cluster.address        # "127.0.0.1:<port>" (GCS)
        cluster.dashboard_url  # "http://127.0.0.1:<port>" (job submission API)
        cluster.kill_worker()  # SIGKILL the worker node's whole tree (fault tests)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from resources.process_tree import alive, descendants

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
RAY = VENV_BIN / "ray"


def ray_available() -> bool:
    try:
        import dagster_ray  # noqa: F401
        import ray  # noqa: F401
    except ImportError:
        return False
    return RAY.exists()


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def node_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    env["PYTHONPATH"] = str(ROOT)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["POLARS_MAX_THREADS"] = "1"
    # a loaded 2-core machine can take longer than Ray's default 30 s to register a raylet
    env["RAY_raylet_start_wait_time_s"] = "120"
    return {**env, **(extra or {})}


@dataclass
class RayCluster:
    address: str
    dashboard_url: str
    temp_dir: Path
    head: subprocess.Popen
    worker: subprocess.Popen | None
    env: dict[str, str]
    logs: list[Path] = field(default_factory=list)

    def kill_worker(self) -> None:
        """SIGKILL the worker node and everything it started (a lost machine)."""
        if self.worker is not None:
            _kill_tree(self.worker, signal.SIGKILL)
            self.worker = None

    def stop(self) -> None:
        for proc in (self.worker, self.head):
            if proc is not None:
                _kill_tree(proc, signal.SIGTERM, grace_s=10.0)
        self.worker = None
        # a Ray process orphaned by a killed node is no longer in either tree: find ours by
        # this cluster's own temp dir in its command line (never by a process name)
        for pid in _pids_mentioning(str(self.temp_dir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _pids_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry))
    return found


def _kill_tree(proc: subprocess.Popen, sig: signal.Signals, grace_s: float = 5.0) -> None:
    pids = {proc.pid} | descendants(proc.pid)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _node_ports() -> list[str]:
    agent, agent_grpc, metrics, runtime_env, node_mgr, obj_mgr = free_ports(6)
    return [
        f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}",
        f"--node-manager-port={node_mgr}", f"--object-manager-port={obj_mgr}",
    ]  # fmt: skip


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(RAY), "start", "--block", "--disable-usage-stats", *args],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
        )  # fmt: skip


def _wait_for_nodes(address: str, env: dict[str, str], count: int, timeout_s: float) -> None:
    probe = (
        "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
        "print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = subprocess.run(
            [sys.executable, "-c", probe, address], capture_output=True, text=True, env=env
        )
        if run.returncode == 0 and run.stdout.strip().splitlines()[-1:] == [str(count)]:
            return
        time.sleep(1.0)
    raise TimeoutError(f"Ray cluster at {address} did not reach {count} nodes in {timeout_s}s")


@contextmanager
def ray_cluster(
    tmp: Path,
    *,
    head_cpus: int = 1,
    worker_cpus: int = 1,
    memory_mb: int = 3072,
    object_store_mb: int = 100,
    env_extra: dict[str, str] | None = None,
    timeout_s: float = 180.0,
) -> Iterator[RayCluster]:
    """Start head + worker (see module docstring); stop both by PID on exit."""
    # Ray's unix socket paths must stay under 108 bytes: a short temp dir of our own
    temp_dir = Path("/tmp") / f"ray-{os.getpid()}-{free_ports(1)[0]}"
    temp_dir.mkdir()
    env = node_env(env_extra)
    gcs_port, dashboard_port, client_port = free_ports(3)
    caps = [f"--memory={memory_mb << 20}", f"--object-store-memory={object_store_mb << 20}"]
    head = _start(
        ["--head", f"--port={gcs_port}", "--node-ip-address=127.0.0.1",
         f"--num-cpus={head_cpus}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
         f"--dashboard-port={dashboard_port}", f"--ray-client-server-port={client_port}",
         f"--temp-dir={temp_dir}", *caps, *_node_ports()],
        tmp / "ray-head.log", env,
    )  # fmt: skip
    address = f"127.0.0.1:{gcs_port}"
    cluster = RayCluster(address, f"http://127.0.0.1:{dashboard_port}", temp_dir, head, None, env)
    try:
        _wait_for_nodes(address, env, 1, timeout_s)
        cluster.worker = _start(
            [f"--address={address}", "--node-ip-address=127.0.0.1", f"--num-cpus={worker_cpus}",
             *caps, *_node_ports()],
            tmp / "ray-worker.log", env,
        )  # fmt: skip
        _wait_for_nodes(address, env, 2, timeout_s)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)
