"""``SlurmLauncher``: multi-node training with ``sbatch`` + ``srun torchrun`` (c10d rendezvous).

Renders one batch script per training run, submits it with ``sbatch --parsable``, polls the
job (``scontrol show job``: works without Slurm accounting), and reads the trainer's Pipes
messages from a file in the run directory (rank 0 opens Pipes; the context travels in the
environment, ``--export=ALL``) or, with ``pipes_s3_bucket``, through S3 (dagster-aws's
``PipesS3ContextInjector`` + ``PipesS3MessageReader``; S3 settings from ``s3: S3Resource``), so
the nodes need no filesystem shared with Dagster (the config and packed tokens can be
``s3://``). The job's own log (``--output=<run_dir>/%x-%j.log``) is the ``LaunchResult``'s log,
which the op shows on failure. With an ``s3://`` config the batch node may not have the op's
folder: the job writes its log to ``node_log_dir`` on the node and copies it next to the config
(``<run_root>/<branch>/<job name>-<job id>.log``, :mod:`pretrain.train.job_log`) every
``log_upload_interval_s`` seconds and when the batch script exits; the op reads the tail there.

Stopping (:meth:`SlurmLauncher.terminate`): ``scancel --signal=TERM`` signals the job's steps
(torchrun forwards SIGTERM to its workers: the trainer finishes its step and checkpoints), then
``scancel`` (SIGKILL after Slurm's KillWait) if the job is still there after ``term_timeout_s``; the op re-raises only once
``squeue`` no longer lists the job, so the GPU pool never overlaps two runs.

    launcher = SlurmLauncher(nodes=4, gpus_per_node=8, partition="gpu", account="llm")
    print(launcher.render_sbatch(job_name="pretrain-b00", config_path="/shared/runs/b00/run.json",
                                 log_dir="/shared/runs/b00"))

On one CPU machine (the tests' one-node cluster, tests/servers/slurm_cluster.py)::

    SlurmLauncher(nodes=1, gpus_per_node=0, nproc_per_node=2, cpus_per_task=2,
                  threads_per_process=1, python=sys.executable, rdzv_host="127.0.0.1")
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path

from dagster import OpExecutionContext

from pretrain import storage
from resources.launching import (
    CPU_ALLOCATOR_ENV,
    PIPES_EVENT_SINK,
    LaunchResult,
    MessageDrain,
    OnMessage,
    RemotePipes,
    inherited_environment,
    pipes_session,
    read_log_tail,
    s3_environment,
    stopping_on_interrupt,
    warn_if_a_stop_is_hindered,
)

TERMINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "UNKNOWN",  # the controller no longer knows the job (older than MinJobAge)
}
SLURM_DEFAULT_KILL_WAIT_S = 30.0  # slurm.conf's KillWait when a cluster does not set it


class SlurmLauncher(RemotePipes):
    """Multi-node torchrun under Slurm; one task per node, ``nproc_per_node`` workers each."""

    nodes: int = 2
    gpus_per_node: int = 8
    nproc_per_node: int | None = None  # workers per node; defaults to gpus_per_node
    cpus_per_task: int = 64
    threads_per_process: int = 8
    partition: str | None = None
    account: str | None = None
    time_limit: str = "7-00:00:00"
    exclusive: bool = True
    python: str = "python"
    rdzv_host: str | None = None  # None: the job's first node; "127.0.0.1" on one machine
    rdzv_port: int = 29500
    setup_lines: list[
        str
    ] = []  # e.g. ["module load cuda/12.4", "source /shared/venv/bin/activate"]
    poll_interval_s: float = 30.0
    term_timeout_s: float = 240.0
    # Pipes through S3 (RemotePipes: pipes_s3_bucket, s3): the job's processes get the S3
    # settings as AWS_* variables (endpoint, credentials) when set
    # an s3:// config: the job log is written on the node, then copied next to the config
    node_log_dir: str = "/tmp"
    log_upload_interval_s: float = 60.0

    def workers_per_node(self) -> int:
        return self.nproc_per_node if self.nproc_per_node is not None else self.gpus_per_node

    def render_sbatch(
        self,
        *,
        job_name: str,
        config_path: str,
        log_dir: str,
        event_sink: str | None = PIPES_EVENT_SINK,
    ) -> str:
        """The batch script. ``log_dir``: where Slurm writes the job log, unless ``config_path``
        is ``s3://``: then on the node (``node_log_dir``), copied to :meth:`log_uri`."""
        remote_log = storage.is_s3(config_path)
        directives = [
            f"--job-name={job_name}",
            f"--nodes={self.nodes}",
            "--ntasks-per-node=1",
            *([f"--gpus-per-node={self.gpus_per_node}"] if self.gpus_per_node else []),
            f"--cpus-per-task={self.cpus_per_task}",
            f"--time={self.time_limit}",
            f"--output={self.node_log_dir if remote_log else log_dir}/%x-%j.log",
            # 5 min before the time limit SIGTERM goes to the steps (torchrun, which forwards it
            # to its workers: they checkpoint and stop), as scancel --signal=TERM does; "B:"
            # would signal only the batch shell, which dies and leaves srun to be killed hard.
            "--signal=TERM@300",
            *(["--exclusive"] if self.exclusive else []),
        ]
        if self.partition:
            directives.append(f"--partition={self.partition}")
        if self.account:
            directives.append(f"--account={self.account}")
        torchrun = [
            self.python, "-m", "torch.distributed.run",
            "--nnodes=$SLURM_NNODES",
            f"--nproc_per_node={self.workers_per_node()}",
            "--rdzv_id=$SLURM_JOB_ID",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint=$MASTER_ADDR:{self.rdzv_port}",
            "-m", "pretrain.train",
            "--config", shlex.quote(config_path),
            *(["--event-sink", event_sink] if event_sink else []),
        ]  # fmt: skip
        lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), "set -euo pipefail"]
        lines += self.setup_lines
        if remote_log:
            node_log = f"{shlex.quote(self.node_log_dir)}/${{SLURM_JOB_NAME}}-${{SLURM_JOB_ID}}.log"
            uri = shlex.quote(storage.join(config_path.rsplit("/", 1)[0], job_name))
            copy = f"{self.python} -m pretrain.train.job_log"
            lines += [
                f"JOB_LOG={node_log}",
                f'LOG_URI={uri}"-${{SLURM_JOB_ID}}.log"',
                f'{copy} --every {self.log_upload_interval_s:g} "$JOB_LOG" "$LOG_URI" &',
                "LOG_COPIER=$!",
                # the last copy when the script exits, however it exits (its status is kept)
                f'trap \'kill $LOG_COPIER 2>/dev/null; {copy} "$JOB_LOG" "$LOG_URI"\' EXIT',
            ]
        if self.rdzv_host:
            lines.append(f"MASTER_ADDR={shlex.quote(self.rdzv_host)}")
        else:
            lines.append('MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)')
        lines += [
            "export MASTER_ADDR",
            f"export OMP_NUM_THREADS={self.threads_per_process}",
            # srun forwards SIGTERM to every node's torchrun, which forwards it to its workers
            "srun --kill-on-bad-exit=1 --label " + " ".join(torchrun),
            "",
        ]
        return "\n".join(lines)

    @staticmethod
    def log_uri(config_path: str, job_name: str, job_id: str) -> str:
        """Where the job log of an ``s3://`` config goes: next to the config."""
        return storage.join(config_path.rsplit("/", 1)[0], f"{job_name}-{job_id}.log")

    def launch(
        self,
        context: OpExecutionContext,
        *,
        config_path: str,
        run_dir: str,
        on_message: OnMessage,
    ) -> LaunchResult:
        """Submit the batch script, relay Pipes messages until the job ends; cancel on interrupt."""
        log_dir = Path(run_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        warn_if_a_stop_is_hindered(context, self.longest_stop_s())
        job_name = f"pretrain-{context.run_id[:8]}"
        script = log_dir / f"{job_name}.sbatch"
        script.write_text(
            self.render_sbatch(job_name=job_name, config_path=config_path, log_dir=str(log_dir))
        )
        drain = MessageDrain(on_message)
        injector, reader = self.channels(context, run_dir=str(log_dir), job_name=job_name)
        with pipes_session(context, injector, reader) as session:
            env = {
                **inherited_environment(),
                **CPU_ALLOCATOR_ENV,
                "PYTHONUNBUFFERED": "1",
                **s3_environment(self.s3),
                **session.get_bootstrap_env_vars(),
            }
            submitted = _run(
                ["sbatch", "--parsable", "--export=ALL", str(script)], env=env, cwd=os.getcwd()
            )
            job_id = submitted.split(";")[0]
            log_path = (
                self.log_uri(config_path, job_name, job_id)
                if storage.is_s3(config_path)
                else str(log_dir / f"{job_name}-{job_id}.log")
            )
            context.log.info(f"submitted Slurm job {job_id} ({script}; log: {log_path})")
            what = f"Slurm job {job_id}"
            with stopping_on_interrupt(context, what, lambda: self.terminate(job_id)):
                while (state := self.job_state(job_id))[0] not in TERMINAL_STATES:
                    drain(session)
                    time.sleep(self.poll_interval_s)
        drain(session)  # messages read after the job ended
        name, exit_code = state
        context.log.info(f"Slurm job {job_id} ended {name} (exit code {exit_code})")
        return LaunchResult(
            returncode=0 if name == "COMPLETED" else (exit_code or 1),
            job_id=job_id,
            log_path=log_path,
            log_tail=read_log_tail(log_path, s3=self.s3),
        )

    def job_state(self, job_id: str) -> tuple[str, int]:
        """(state, exit code) from ``scontrol show job``; ``UNKNOWN`` once the job is forgotten.

        The exit code is the batch script's, or 128 + the signal that ended it."""
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True
        )
        if done.returncode != 0:
            if "Invalid job id" in done.stderr:
                return "UNKNOWN", 1
            raise RuntimeError(f"scontrol show job {job_id} failed: {done.stderr.strip()}")
        fields = dict(re.findall(r"(\w+)=(\S*)", done.stdout))
        code, _, signal = fields.get("ExitCode", "0:0").partition(":")
        exit_code = int(code) or (128 + int(signal) if signal and int(signal) else 0)
        return fields.get("JobState", "UNKNOWN"), exit_code

    def in_queue(self, job_id: str) -> bool:
        done = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        )
        if done.returncode != 0 and "Invalid job id" not in done.stderr:
            raise RuntimeError(f"squeue -j {job_id} failed: {done.stderr.strip()}")
        return done.returncode == 0 and bool(done.stdout.strip())

    def kill_wait_s(self) -> float:
        """The cluster's ``KillWait`` (``scontrol show config``): how long a hard ``scancel``
        waits between SIGTERM and SIGKILL; Slurm's default when it cannot be read."""
        try:
            done = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True)
        except OSError:
            return SLURM_DEFAULT_KILL_WAIT_S
        found = re.search(r"^KillWait\s*=\s*(\d+)", done.stdout, re.MULTILINE)
        return float(found.group(1)) if found else SLURM_DEFAULT_KILL_WAIT_S

    def longest_stop_s(self) -> float:
        """``term_timeout_s`` for the steps to end on SIGTERM, then the hard cancel's KillWait."""
        return self.term_timeout_s + self.kill_wait_s()

    def terminate(self, job_id: str) -> None:
        """SIGTERM the job's steps, wait, then cancel hard; return once the job left the queue.

        The signal goes to the steps (torchrun on every node, which forwards it to its workers:
        the trainer finishes its step and checkpoints), not to the batch shell or ``srun``:
        ``--full`` would end the batch shell, and Slurm would then kill the step before the
        trainer saved anything. A job still pending has no step: it is cancelled outright."""
        if self.job_state(job_id)[0] == "PENDING":
            _run(["scancel", job_id])
        else:
            _run(["scancel", "--signal=TERM", job_id])
        deadline = time.monotonic() + self.term_timeout_s
        while self.in_queue(job_id):
            if time.monotonic() > deadline:
                _run(["scancel", job_id])
                deadline = float("inf")
            time.sleep(min(self.poll_interval_s, 1.0))


def _run(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip()
