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
Slurm and Kubernetes launchers for multi-node training implement the same ``launch``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagster import (
    ConfigurableResource,
    OpExecutionContext,
    PipesTempFileContextInjector,
    PipesTempFileMessageReader,
    PreviewWarning,
    open_pipes_session,
)

from resources.process_tree import stop_process_tree

# glibc returns big tensor buffers to the kernel after every step on these machines;
# these settings halve CPU step time (see ENVIRONMENT.md, "CPU training speed").
CPU_ALLOCATOR_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "4294967296",
    "MALLOC_TRIM_THRESHOLD_": "17179869184",
    "MALLOC_TOP_PAD_": "1073741824",
}
PIPES_EVENT_SINK = "jobs.pipes_sink:PipesEventSink"


class MessageDrain:
    """Hands each new Pipes custom message to ``on_message`` once.

    ``session.get_custom_messages()`` returns the whole list so far, so the drain keeps an index.
    """

    def __init__(self, on_message: Callable[[dict[str, Any]], None]) -> None:
        self.on_message = on_message
        self.seen = 0

    def __call__(self, session: Any) -> None:
        messages = session.get_custom_messages()
        for message in messages[self.seen :]:
            self.on_message(message)
        self.seen = len(messages)


def inherited_environment() -> dict[str, str]:
    """Our environment for a trainer, minus ``WANDB_SERVICE``.

    A process that has used wandb (a sensor, a notebook, a test) exports ``WANDB_SERVICE``, the
    address of its own wandb-core service. A trainer that inherits it attaches its runs to that
    long-lived service, which still holds the run id after the trainer is killed (``kill -9``),
    so every resume then fails with "run ID ... is in use". Each trainer starts its own service
    instead, which dies with it.
    """
    return {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}


class TorchrunLauncher(ConfigurableResource):
    """Local ``torchrun`` launcher (gloo on CPU, NCCL on GPU)."""

    nproc_per_node: int = 2
    threads_per_process: int = 1
    term_timeout_s: float = 90.0
    kill_timeout_s: float = 15.0
    poll_interval_s: float = 0.5

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
        log_path: str,
        on_message: Callable[[dict[str, Any]], None],
    ) -> int:
        """Run the trainer to completion; returns torchrun's exit code."""
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():  # Pipes' message reader API is marked preview in 1.13
            warnings.simplefilter("ignore", PreviewWarning)
            returncode = self._run(context, config_path, log_path, on_message)
        return returncode

    def _run(
        self,
        context: OpExecutionContext,
        config_path: str,
        log_path: str,
        on_message: Callable[[dict[str, Any]], None],
    ) -> int:
        drain = MessageDrain(on_message)
        with (
            open(log_path, "ab") as log,
            open_pipes_session(
                context=context,
                context_injector=PipesTempFileContextInjector(),
                message_reader=PipesTempFileMessageReader(),
            ) as session,
        ):
            env = {**self.environment(), **session.get_bootstrap_env_vars()}
            cmd = self.command(config_path)
            context.log.info(f"launching: {' '.join(cmd)} (log: {log_path})")
            proc = subprocess.Popen(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                while proc.poll() is None:
                    drain(session)
                    time.sleep(self.poll_interval_s)
            except BaseException:
                context.log.warning(f"interrupted: stopping torchrun {proc.pid} and its workers")
                stop_process_tree(proc, self.term_timeout_s, self.kill_timeout_s)
                context.log.warning("torchrun and every worker are gone")
                raise
        drain(session)  # messages read after the process exited and the reader closed
        return proc.returncode
