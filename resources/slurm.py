"""``SlurmLauncher``: multi-node training with ``sbatch`` + ``srun torchrun`` (c10d rendezvous).

Renders one batch script per training run, submits it with ``sbatch --parsable``, polls the
job, and reads the trainer's Pipes messages from a file in the run directory (checkpoints
already need a filesystem shared by every node and by Dagster, so the message file lives
there too). Rank 0 opens Pipes; the context travels in the environment (``--export=ALL``).

Stopping: ``scancel --signal=TERM --full`` lets torchrun forward SIGTERM (the trainer
finishes its step and checkpoints), then ``scancel`` (SIGKILL after Slurm's KillWait) if the
job is still there after ``term_timeout_s``; the op re-raises only once ``squeue`` no longer
lists the job, so the GPU pool never overlaps two runs.

    launcher = SlurmLauncher(nodes=4, gpus_per_node=8, partition="gpu", account="llm")
    print(launcher.render_sbatch(job_name="pretrain-b00", config_path="/shared/runs/b00/run.json",
                                 log_dir="/shared/runs/b00"))
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagster import (
    ConfigurableResource,
    OpExecutionContext,
    PipesEnvContextInjector,
    PipesFileMessageReader,
    open_pipes_session,
)

from resources.launcher import (
    CPU_ALLOCATOR_ENV,
    PIPES_EVENT_SINK,
    MessageDrain,
    inherited_environment,
)

TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


class SlurmLauncher(ConfigurableResource):
    """Multi-node torchrun under Slurm; one task per node, ``gpus_per_node`` workers each."""

    nodes: int = 2
    gpus_per_node: int = 8
    cpus_per_task: int = 64
    partition: str | None = None
    account: str | None = None
    time_limit: str = "7-00:00:00"
    python: str = "python"
    rdzv_port: int = 29500
    setup_lines: list[
        str
    ] = []  # e.g. ["module load cuda/12.4", "source /shared/venv/bin/activate"]
    poll_interval_s: float = 30.0
    term_timeout_s: float = 240.0

    def render_sbatch(self, *, job_name: str, config_path: str, log_dir: str) -> str:
        directives = [
            f"--job-name={job_name}",
            f"--nodes={self.nodes}",
            "--ntasks-per-node=1",
            f"--gpus-per-node={self.gpus_per_node}",
            f"--cpus-per-task={self.cpus_per_task}",
            f"--time={self.time_limit}",
            f"--output={log_dir}/%x-%j.log",
            "--signal=B:TERM@300",  # warn the batch shell 5 min before the time limit
            "--exclusive",
        ]
        if self.partition:
            directives.append(f"--partition={self.partition}")
        if self.account:
            directives.append(f"--account={self.account}")
        torchrun = [
            self.python, "-m", "torch.distributed.run",
            "--nnodes=$SLURM_NNODES",
            f"--nproc_per_node={self.gpus_per_node}",
            "--rdzv_id=$SLURM_JOB_ID",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint=$MASTER_ADDR:{self.rdzv_port}",
            "-m", "pretrain.train",
            "--config", shlex.quote(config_path),
            "--event-sink", PIPES_EVENT_SINK,
        ]  # fmt: skip
        lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), "set -euo pipefail"]
        lines += self.setup_lines
        lines += [
            'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "export MASTER_ADDR",
            "export OMP_NUM_THREADS=8",
            # srun forwards SIGTERM to every node's torchrun, which forwards it to its workers
            "srun --kill-on-bad-exit=1 --label " + " ".join(torchrun),
            "",
        ]
        return "\n".join(lines)

    def launch(
        self,
        context: OpExecutionContext,
        *,
        config_path: str,
        log_path: str,
        on_message: Callable[[dict[str, Any]], None],
    ) -> int:
        log_dir = Path(log_path).parent
        job_name = f"pretrain-{context.run_id[:8]}"
        script = log_dir / f"{job_name}.sbatch"
        script.write_text(
            self.render_sbatch(job_name=job_name, config_path=config_path, log_dir=str(log_dir))
        )
        drain = MessageDrain(on_message)
        with open_pipes_session(
            context=context,
            context_injector=PipesEnvContextInjector(),
            message_reader=PipesFileMessageReader(str(log_dir / f"{job_name}.pipes.jsonl")),
        ) as session:
            env = {
                **inherited_environment(),
                **CPU_ALLOCATOR_ENV,
                **session.get_bootstrap_env_vars(),
            }
            submitted = _run(["sbatch", "--parsable", "--export=ALL", str(script)], env=env)
            job_id = submitted.split(";")[0]
            context.log.info(f"submitted Slurm job {job_id} ({script})")
            try:
                while (state := self.job_state(job_id)) not in TERMINAL_STATES:
                    drain(session)
                    time.sleep(self.poll_interval_s)
            except BaseException:
                self.cancel(job_id)
                raise
        drain(session)  # messages read after the job ended
        return 0 if state == "COMPLETED" else 1

    def job_state(self, job_id: str) -> str:
        out = _run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"])
        return (out.splitlines() or ["PENDING"])[0].split()[0]

    def cancel(self, job_id: str) -> None:
        """SIGTERM every step, wait, then cancel hard; return once the job has left the queue."""
        _run(["scancel", "--signal=TERM", "--full", job_id])
        deadline = time.monotonic() + self.term_timeout_s
        while _run(["squeue", "-h", "-j", job_id, "-o", "%T"]).strip():
            if time.monotonic() > deadline:
                _run(["scancel", job_id])
                deadline = float("inf")
            time.sleep(5)


def _run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.strip()
