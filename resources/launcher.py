"""``TorchrunLauncher``: runs the trainer under ``torchrun`` on this machine, through Pipes.

The op writes ``run.json`` and calls :meth:`TorchrunLauncher.launch`; the launcher runs::

    python -m pretrain.train.torchrun_local --standalone --local-addr=127.0.0.1 --nproc_per_node=N \
        -m pretrain.train --config run.json --event-sink jobs.pipes_sink:PipesEventSink

(``pretrain.train.torchrun_local`` is torchrun with its rendezvous stores listening on
127.0.0.1 only, not on every interface.)

in its own process group. Rank 0 speaks Dagster Pipes (logs + custom ``checkpoint`` events);
the launcher hands each custom message to a callback while the trainer keeps running.

Stopping a run (cancel from the UI, a recovery sensor terminating it) interrupts the op; the
launcher then sends SIGTERM to torchrun and every worker (each worker runs in a session of
its own), waits longer than torchrun's own 30 s grace plus a checkpoint save, escalates to
SIGKILL, confirms every process is gone and only then re-raises, so a resume run queued on the ``gpu`` pool never overlaps the old workers.
Slurm and Kubernetes launchers for multi-node training implement the same
:class:`resources.launching.Launcher` protocol (``launch`` → ``LaunchResult``, ``terminate``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from dagster import (
    ConfigurableResource,
    OpExecutionContext,
    PipesTempFileContextInjector,
    PipesTempFileMessageReader,
)
from pydantic import PrivateAttr

from resources.launching import (
    CPU_ALLOCATOR_ENV,
    PIPES_EVENT_SINK,
    LaunchResult,
    MessageDrain,
    OnMessage,
    inherited_environment,
    pipes_session,
    read_log_tail,
    stopping_on_interrupt,
    warn_if_a_stop_is_hindered,
)
from resources.process_tree import stop_process_tree

__all__ = [
    "CPU_ALLOCATOR_ENV",
    "PIPES_EVENT_SINK",
    "MessageDrain",
    "TorchrunLauncher",
    "inherited_environment",
]


class TorchrunLauncher(ConfigurableResource):
    """Local ``torchrun`` launcher (gloo on CPU, NCCL on GPU)."""

    nproc_per_node: int = 2
    threads_per_process: int = 1
    term_timeout_s: float = 90.0
    kill_timeout_s: float = 15.0
    poll_interval_s: float = 0.5
    _procs: dict[str, subprocess.Popen] = PrivateAttr(default_factory=dict)

    def command(self, config_path: str, event_sink: str | None = PIPES_EVENT_SINK) -> list[str]:
        sink = ["--event-sink", event_sink] if event_sink else []
        return [
            sys.executable,
            "-m",
            "pretrain.train.torchrun_local",  # torchrun, its stores bound to 127.0.0.1
            "--standalone",
            "--local-addr=127.0.0.1",
            f"--nproc_per_node={self.nproc_per_node}",
            "-m",
            "pretrain.train",
            "--config",
            config_path,
            *sink,
        ]

    def environment(self) -> dict[str, str]:
        """The trainer's environment (:func:`inherited_environment`) plus CPU/thread settings."""
        return {
            **inherited_environment(),
            **CPU_ALLOCATOR_ENV,
            "OMP_NUM_THREADS": str(self.threads_per_process),
            "PYTHONUNBUFFERED": "1",
        }

    def launch(
        self,
        context: OpExecutionContext,
        *,
        config_path: str,
        run_dir: str,
        on_message: OnMessage,
    ) -> LaunchResult:
        """Run the trainer to completion; the result's log is ``torchrun-<run_id>.log``."""
        log_path = Path(run_dir) / f"torchrun-{context.run_id}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        warn_if_a_stop_is_hindered(context, self.longest_stop_s())
        drain = MessageDrain(on_message)
        with (
            open(log_path, "ab") as log,
            pipes_session(
                context, PipesTempFileContextInjector(), PipesTempFileMessageReader()
            ) as session,
        ):
            env = {**self.environment(), **session.get_bootstrap_env_vars()}
            cmd = self.command(config_path)
            context.log.info(f"launching: {' '.join(cmd)} (log: {log_path})")
            proc = subprocess.Popen(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            job_id = str(proc.pid)
            self._procs[job_id] = proc
            what = f"torchrun {proc.pid} and its workers"
            try:
                with stopping_on_interrupt(context, what, lambda: self.terminate(job_id)):
                    while proc.poll() is None:
                        drain(session)
                        time.sleep(self.poll_interval_s)
            finally:
                self._procs.pop(job_id, None)
        drain(session)  # messages read after the process exited and the reader closed
        return LaunchResult(
            returncode=proc.returncode,
            job_id=job_id,
            log_path=str(log_path),
            log_tail=read_log_tail(log_path),
        )

    def longest_stop_s(self) -> float:
        return self.term_timeout_s + self.kill_timeout_s

    def terminate(self, job_id: str) -> None:
        """SIGTERM torchrun and every worker, SIGKILL after ``term_timeout_s``; return when gone."""
        target = self._procs.get(job_id) or int(job_id)
        stop_process_tree(target, self.term_timeout_s, self.kill_timeout_s)
