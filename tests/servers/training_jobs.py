"""One handle for a training job however it was started: a local torchrun or a Slurm job.

The fault-injection campaign (tests/faults/test_fault_injection.py) plays the training op around the
real sensors; these handles let it run the same faults through ``torchrun`` on this machine and
through ``sbatch`` → ``srun torchrun`` on the tests' one-node Slurm cluster:

    job = start_job("slurm", config_path, log_path, slurm_launcher)
    while job.poll() is None: ...
    job.stop()            # the op's interruption path: every process gone on return
    job.pids()            # the trainer's processes (torchrun + workers), for kill -9
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Protocol

from resources.launcher import TorchrunLauncher
from resources.process_tree import alive, descendants, stop_process_tree
from resources.slurm import TERMINAL_STATES, SlurmLauncher


class TrainingJob(Protocol):
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout_s: float = 60.0) -> int: ...

    def stop(self) -> None: ...

    def pids(self) -> set[int]: ...


def processes_naming(marker: str) -> set[int]:
    """Live processes whose command line contains ``marker`` (a run's config file name)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and alive(int(entry.name)):
                found.add(int(entry.name))
    return found


class TorchrunJob:
    def __init__(self, launcher: TorchrunLauncher, config_path: Path, log_path: Path) -> None:
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                launcher.command(str(config_path), event_sink=None),
                env=launcher.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout_s: float = 60.0) -> int:
        return self.proc.wait(timeout=timeout_s)

    def stop(self) -> None:
        stop_process_tree(self.proc, term_timeout_s=60, kill_timeout_s=10)

    def pids(self) -> set[int]:
        return {self.proc.pid} | descendants(self.proc.pid)


class SlurmJob:
    """A batch job of the training command, submitted as the ``SlurmLauncher`` renders it."""

    def __init__(self, launcher: SlurmLauncher, config_path: str | Path, log_dir: Path) -> None:
        """``config_path``: a local path or an ``s3://`` URI; ``log_dir``: the submit folder."""
        self.marker = str(config_path).rsplit("/", 1)[-1]
        self.launcher = launcher
        name = f"pretrain-{self.marker.removesuffix('.json')}"
        log_dir.mkdir(parents=True, exist_ok=True)
        script = log_dir / f"{name}.sbatch"
        script.write_text(
            launcher.render_sbatch(
                job_name=name, config_path=str(config_path), log_dir=str(log_dir), event_sink=None
            )
        )
        out = subprocess.run(
            ["sbatch", "--parsable", "--export=ALL", str(script)],
            check=True,
            capture_output=True,
            text=True,
        )
        self.job_id = out.stdout.strip().split(";")[0]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            state, code = self.launcher.job_state(self.job_id)
            # the job has ended for Slurm once it left the queue (COMPLETING is not the end)
            if state in TERMINAL_STATES and not self.launcher.in_queue(self.job_id):
                self.returncode = 0 if state == "COMPLETED" else (code or 1)
        return self.returncode

    def wait(self, timeout_s: float = 60.0) -> int:
        deadline = time.monotonic() + timeout_s
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm job {self.job_id} still running after {timeout_s} s")
            time.sleep(0.3)
        return self.returncode

    def stop(self) -> None:
        self.launcher.terminate(self.job_id)
        assert processes_naming(self.marker) == set(), "a trainer process outlived scancel"
        self.wait()

    def pids(self) -> set[int]:
        return processes_naming(self.marker)
