"""A real one-node Slurm cluster for the tests: ``munged``, ``slurmctld`` and ``slurmd``.

Debian's ``slurm-wlm`` and ``munge`` packages (``.ci/run`` installs them) run a cluster of one
node on the test machine as root. Everything the cluster writes (config, state, spool, logs, the
munge socket) lives in a folder of its own and every daemon listens on ports picked free at start,
so clusters of several worktrees or test sessions on one machine do not meet. The three daemons run
in the foreground as our children and are stopped by PID afterwards::

    with slurm_cluster(tmp_path / "slurm") as cluster:
        subprocess.run(["srun", "-n2", "hostname"], env=cluster.env(), check=True)
        launcher = cluster.launcher()    # a SlurmLauncher for this node (2 gloo workers)

``slurm_unavailable()`` says why a cluster cannot run here (not root, packages missing), for
``pytest.skip``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from resources.slurm import SlurmLauncher

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo")
MUNGE_KEY = Path("/etc/munge/munge.key")


def slurm_unavailable() -> str | None:
    """Why no cluster can start here, or None when it can."""
    if os.geteuid() != 0:
        return "the one-node Slurm cluster runs its daemons as root"
    missing = [
        name
        for name in (*DAEMONS, *CLIENTS)
        if shutil.which(name) is None and not Path(f"/usr/sbin/{name}").exists()
    ]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
    if not MUNGE_KEY.exists():
        return f"{MUNGE_KEY} is missing (the munge package creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _daemon(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclasses.dataclass
class SlurmCluster:
    """A running cluster: its config file, node name and the daemons' processes."""

    root: Path
    conf: Path
    node: str
    cpus: int
    processes: dict[str, subprocess.Popen] = dataclasses.field(default_factory=dict)

    def launcher(self, **overrides: Any) -> SlurmLauncher:
        """A ``SlurmLauncher`` for this node: 2 gloo workers, c10d rendezvous on 127.0.0.1."""
        settings: dict[str, Any] = {
            "nodes": 1,
            "gpus_per_node": 0,
            "nproc_per_node": 2,
            "cpus_per_task": min(2, self.cpus),
            "threads_per_process": 1,
            "time_limit": "00:30:00",
            "python": sys.executable,
            "rdzv_host": "127.0.0.1",
            "rdzv_port": _free_port(),
            "poll_interval_s": 1.0,
            "term_timeout_s": 60.0,
        }
        return SlurmLauncher(**{**settings, **overrides})

    def env(self) -> dict[str, str]:
        """Our environment plus ``SLURM_CONF``, for the client commands."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *cmd: str) -> str:
        done = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def queue(self) -> list[str]:
        """The ids of every job still in the queue (pending, running, completing)."""
        return self.run("squeue", "-h", "-o", "%i").split()

    def job_state_of(self, job_id: str) -> str:
        out = self.run("scontrol", "show", "job", "-o", job_id)
        return next(f.split("=", 1)[1] for f in out.split() if f.startswith("JobState="))

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T").strip()

    def logs(self) -> str:
        parts = []
        for name in DAEMONS:
            path = self.root / f"{name}.log"
            if path.exists():
                parts.append(f"== {name}.log ==\n{path.read_text()[-3000:]}")
        return "\n".join(parts)


def write_conf(root: Path, node: str, cpus: int, munge_socket: Path) -> Path:
    ctld_port, slurmd_port = _free_port(), _free_port()
    lines = [
        "ClusterName=pretraintest",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/builtin",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'slurmd.log'}",
        "ReturnToService=2",
        "MpiDefault=none",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "KillWait=10",
        "MinJobAge=300",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=8000 State=UNKNOWN",
        f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
    ]
    conf = root / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _start_munged(root: Path) -> tuple[subprocess.Popen, Path]:
    # munged refuses a socket folder that others may write to or that it cannot own: a private
    # folder of the munge user under /run/munge (our tmp folders are root's, mode 700)
    base = Path("/run/munge")
    base.mkdir(parents=True, exist_ok=True)
    shutil.chown(base, "munge", "munge")
    folder = Path(tempfile.mkdtemp(prefix="pretrain-", dir=base))
    shutil.chown(folder, "munge", "munge")
    os.chmod(folder, 0o755)
    munge_socket = folder / "munge.socket"
    cmd = [
        "runuser", "-u", "munge", "--", _daemon("munged"), "--foreground",
        f"--socket={munge_socket}", f"--pid-file={folder / 'munged.pid'}",
        f"--log-file={folder / 'munged.log'}", f"--seed-file={folder / 'munged.seed'}",
        f"--key-file={MUNGE_KEY}",
    ]  # fmt: skip
    log = open(root / "munged.out", "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _wait(lambda: munge_socket.exists(), 20, "munged's socket", proc)
    return proc, munge_socket


def _wait(predicate, timeout_s: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the daemon exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def slurm_cluster(root: Path, cpus: int | None = None) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd; yield once the node is idle; stop all three by PID."""
    reason = slurm_unavailable()
    if reason:
        raise RuntimeError(reason)
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool"):
        (root / sub).mkdir(exist_ok=True)
    node = socket.gethostname()
    cpus = cpus or os.cpu_count() or 1
    munged, munge_socket = _start_munged(root)
    cluster = SlurmCluster(root=root, conf=root / "slurm.conf", node=node, cpus=cpus)
    cluster.processes["munged"] = munged
    try:
        write_conf(root, node, cpus, munge_socket)
        env = cluster.env()
        for name, flags in (("slurmctld", ["-D", "-i"]), ("slurmd", ["-D"])):
            out = open(root / f"{name}.out", "ab")
            cluster.processes[name] = subprocess.Popen(
                [_daemon(name), *flags, "-f", str(cluster.conf)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait(lambda: _idle(cluster), 60, "the Slurm node to be idle")
        yield cluster
    except BaseException as exc:
        if not isinstance(exc, GeneratorExit):
            exc.add_note(cluster.logs())
        raise
    finally:
        for name in ("slurmd", "slurmctld", "munged"):  # the reverse of the start order
            if name in cluster.processes:
                _stop(cluster.processes[name])
        shutil.rmtree(munge_socket.parent, ignore_errors=True)


def _idle(cluster: SlurmCluster) -> bool:
    for name, proc in cluster.processes.items():
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}\n{cluster.logs()}")
    try:
        return cluster.node_state().startswith("idle")
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
