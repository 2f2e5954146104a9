"""What every training launcher provides, and the Pipes plumbing they share.

The ``train_model`` op is typed to :class:`Launcher`, a protocol that the local
``TorchrunLauncher`` (resources/launcher.py), ``SlurmLauncher`` (resources/slurm.py) and
``KubernetesLauncher`` (resources/kubernetes.py) implement:

- ``launch(context, config_path=..., run_dir=..., on_message=...) -> LaunchResult`` runs the
  trainer to its end, handing each Pipes custom message (a ``checkpoint`` event, ``finished``,
  ``stopped``) to ``on_message`` while it runs; on an interruption (a terminated Dagster run) it
  calls ``terminate`` on its own job and re-raises once nothing of the job is left.
- ``terminate(job_id)`` stops one job (a torchrun process tree, a Slurm job, a PyTorchJob) and
  returns only when none of its processes or pods is left.
- ``longest_stop_s()`` bounds how long ``terminate`` can take by the launcher's settings. At
  launch, :func:`warn_if_a_stop_is_hindered` checks it against the instance's
  ``run_monitoring.cancel_timeout_seconds``: the run monitor marks a run still stopping after
  that long CANCELED, which frees the ``gpu`` pool for the next run while the job still runs.
  It also warns when the step's process ignores SIGTERM (``SIGTERM_IGNORED``).
- :class:`LaunchResult` carries the return code, the job id and the launcher's *own* log (the
  torchrun output, the Slurm job's ``%x-%j.log``, the master pod's log), so the op's failure
  shows the log of whatever ran.

    result = launcher.launch(context, config_path=cfg, run_dir=branch_dir, on_message=print)
    if not result.ok:
        raise Failure(description=f"exit code {result.returncode}", metadata=result.metadata())
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from dagster import (
    ConfigurableResource,
    MetadataValue,
    OpExecutionContext,
    PipesContextInjector,
    PipesEnvContextInjector,
    PipesFileMessageReader,
    PipesMessageReader,
    PipesSession,
    PreviewWarning,
    open_pipes_session,
)
from dagster_aws.s3 import S3Resource

from pretrain import storage

# glibc returns big tensor buffers to the kernel after every step: 30-47% of a small CPU
# training loop's time went to the kernel; these settings halved a 20M-parameter model's bf16
# step (0.67 s -> 0.34 s, 2 threads; bench/train_overhead.py measures the trainer).
CPU_ALLOCATOR_ENV = {
    "MALLOC_MMAP_THRESHOLD_": "4294967296",
    "MALLOC_TRIM_THRESHOLD_": "17179869184",
    "MALLOC_TOP_PAD_": "1073741824",
}
PIPES_EVENT_SINK = "jobs.pipes_sink:PipesEventSink"
# Pipes over S3: seconds between the trainer's chunk uploads and between the op's reads. Both
# dagster loops compare *whole* elapsed seconds and sleep 1 s, so N means about every N + 1 s:
# 2.0 delivers a checkpoint event within ~8 s; 0 within ~3 s, for twice the S3 requests.
PIPES_S3_INTERVAL_S = 2.0
LOG_TAIL_CHARS = 4000
# Dagster's own end of a step after the op: it waits up to 30 s for each of its compute-log
# ``tail`` and orphan-watcher processes (dagster/_core/execution/compute_logs.py)
DAGSTER_STEP_CLEANUP_S = 60.0

OnMessage = Callable[[dict[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class LaunchResult:
    """How a launched training job ended: its return code and its own log."""

    returncode: int
    job_id: str
    log_path: str
    log_tail: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def metadata(self) -> dict[str, Any]:
        return {
            "returncode": self.returncode,
            "job_id": self.job_id,
            "log_path": MetadataValue.path(self.log_path),
            "log_tail": MetadataValue.text(self.log_tail),
        }


@runtime_checkable
class Launcher(Protocol):
    """Runs ``pretrain.train`` somewhere and reports back through Pipes."""

    def launch(
        self,
        context: OpExecutionContext,
        *,
        config_path: str,
        run_dir: str,
        on_message: OnMessage,
    ) -> LaunchResult: ...

    def terminate(self, job_id: str) -> None: ...

    def longest_stop_s(self) -> float: ...


def cancel_timeout_problem(cancel_timeout_s: float, longest_stop_s: float) -> str | None:
    """Why run monitoring would call a stopping run CANCELED too early, or None when it won't.

    >>> cancel_timeout_problem(420, 250) is None
    True
    """
    needed = longest_stop_s + DAGSTER_STEP_CLEANUP_S
    if cancel_timeout_s >= needed:
        return None
    return (
        f"run_monitoring.cancel_timeout_seconds is {cancel_timeout_s:.0f} s, but stopping this"
        f" launcher's job can take {longest_stop_s:.0f} s, and Dagster's step cleanup"
        f" {DAGSTER_STEP_CLEANUP_S:.0f} s more: a terminated run could show CANCELED, and free"
        " the gpu pool for the next run, while its job still runs. Set cancel_timeout_seconds"
        f" to at least {needed:.0f} in dagster.yaml"
    )


SIGTERM_IGNORED = (
    "this step's process ignores SIGTERM, and so does every process it starts (Dagster's"
    " compute-log tail waits out 30 s timeouts at the step's end). Dagster copies SIGINT's"
    " handler onto SIGTERM, and SIGINT was ignored: Dagster was started in the background by a"
    " shell without job control. Start it in the foreground, under systemd, or after"
    " `trap - INT`"
)


def warn_if_a_stop_is_hindered(context: OpExecutionContext, longest_stop_s: float) -> None:
    """Warn in the run's log when the instance's cancel timeout is shorter than a stop, or
    when this process ignores SIGTERM (see ``SIGTERM_IGNORED``)."""
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        context.log.warning(SIGTERM_IGNORED)
    instance = context.instance
    if instance.run_monitoring_enabled:
        problem = cancel_timeout_problem(
            instance.run_monitoring_cancel_timeout_seconds, longest_stop_s
        )
        if problem:
            context.log.warning(problem)


@contextmanager
def stopping_on_interrupt(
    context: OpExecutionContext, what: str, stop: Callable[[], None]
) -> Iterator[None]:
    """Wrap a launcher's wait for its job: on any interruption, stop the job, then re-raise.

    The stop comes before any write to the instance. The interruption can land inside one (a
    checkpoint's materialization, while Pipes messages are drained), and a log write that then
    fails must not leave the job running. The line before the stop goes to stderr, which the
    step's compute log shows at once.

        with stopping_on_interrupt(context, f"Slurm job {job_id}", lambda: self.terminate(job_id)):
            while not done():
                time.sleep(poll_s)
    """
    try:
        yield
    except BaseException:
        print(f"interrupted: stopping {what}", file=sys.stderr, flush=True)
        stop()
        context.log.warning(f"interrupted: stopped {what}; nothing of it is left")
        raise


def read_log_tail(
    path: str | Path, chars: int = LOG_TAIL_CHARS, s3: S3Resource | None = None
) -> str:
    """The last ``chars`` characters of a log (a local path or an ``s3://`` URI: only the tail
    is read), or a line saying why there is none. ``s3``: the launcher's ``S3Resource``, whose
    settings then reach S3 (else the standard AWS variables)."""
    if s3 is not None and storage.is_s3(str(path)):
        bucket, _, key = str(path).removeprefix("s3://").partition("/")
        client = s3.get_client()
        try:
            # a suffix range: the last bytes only, the whole object when it is shorter
            body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=-{4 * chars}")["Body"]
        except client.exceptions.NoSuchKey:
            return f"(no log: {path} was never written)"
        return body.read().decode(errors="replace")[-chars:]
    fs, inner = storage.filesystem(str(path))
    try:
        with fs.open_input_file(inner) as log:
            log.seek(max(0, log.size() - 4 * chars))
            return log.read().decode(errors="replace")[-chars:]
    except FileNotFoundError:
        return f"(no log: {path} was never written)"


class MessageDrain:
    """Hands each new Pipes custom message to ``on_message`` once.

    ``session.get_custom_messages()`` returns the whole list so far, so the drain keeps an index.
    """

    def __init__(self, on_message: OnMessage) -> None:
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


def s3_environment(s3: S3Resource | None) -> dict[str, str]:
    """The standard AWS variables for a job's processes from the ``S3Resource``'s settings
    (only those set: on a cluster with instance roles nothing needs to travel)."""
    if s3 is None:
        return {}
    pairs = {
        "AWS_ENDPOINT_URL": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": s3.aws_access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3.aws_secret_access_key,
        "AWS_SESSION_TOKEN": s3.aws_session_token,
        "AWS_DEFAULT_REGION": s3.region_name,
    }
    return {k: v for k, v in pairs.items() if v}


def pipes_channels(
    *,
    run_dir: str,
    job_name: str,
    run_id: str,
    s3_bucket: str | None,
    s3_prefix: str,
    s3: S3Resource | None,
    s3_interval_s: float = PIPES_S3_INTERVAL_S,
) -> tuple[PipesContextInjector, PipesMessageReader]:
    """The Pipes context injector and message reader for a job on other nodes.

    Without a bucket: the context in the environment and messages in a file of ``run_dir``
    (a filesystem shared by every node and Dagster). With ``s3_bucket``: both through S3
    (dagster-aws), under ``<s3_prefix>/<run_id>/``; no shared filesystem needed. The trainer's
    writer uploads at the reader's ``s3_interval_s`` (it travels in the messages params)."""
    if not s3_bucket:
        return PipesEnvContextInjector(), PipesFileMessageReader(
            str(Path(run_dir) / f"{job_name}.pipes.jsonl")
        )
    from dagster_aws.pipes import PipesS3ContextInjector

    client = (s3 or S3Resource()).get_client()
    return (
        PipesS3ContextInjector(bucket=s3_bucket, client=client, key_prefix=f"{s3_prefix}/{run_id}"),
        _s3_message_reader(bucket=s3_bucket, client=client, interval=s3_interval_s),
    )


class RemotePipes(ConfigurableResource):
    """Pipes settings of a launcher whose job runs on other nodes (Slurm, Kubernetes).

    Without ``pipes_s3_bucket``: the context in the environment, messages in a file of the run
    folder (a filesystem shared by every node and Dagster). With it: both through S3
    (dagster-aws), with ``s3``'s endpoint and credentials on the op's side."""

    pipes_s3_bucket: str | None = None
    pipes_s3_prefix: str = "pipes"
    pipes_s3_interval_s: float = PIPES_S3_INTERVAL_S  # see PIPES_S3_INTERVAL_S above
    s3: S3Resource | None = None

    def channels(
        self, context: OpExecutionContext, *, run_dir: str, job_name: str
    ) -> tuple[PipesContextInjector, PipesMessageReader]:
        """This launcher's injector and reader for one job (:func:`pipes_channels`)."""
        return pipes_channels(
            run_dir=run_dir,
            job_name=job_name,
            run_id=context.run_id,
            s3_bucket=self.pipes_s3_bucket,
            s3_prefix=self.pipes_s3_prefix,
            s3_interval_s=self.pipes_s3_interval_s,
            s3=self.s3,
        )


def _s3_message_reader(*, bucket: str, client: Any, interval: float) -> PipesMessageReader:
    """dagster-aws's ``PipesS3MessageReader`` whose params also carry its ``interval``, so the
    trainer's ``PipesS3MessageWriter`` uploads as often as the op reads (jobs/pipes_sink.py)."""
    from dagster_aws.pipes import PipesS3MessageReader

    class IntervalS3MessageReader(PipesS3MessageReader):
        @contextmanager
        def get_params(self) -> Iterator[dict[str, Any]]:
            with super().get_params() as params:
                yield {**params, "interval": self.interval}

    return IntervalS3MessageReader(bucket=bucket, client=client, interval=interval)


@contextmanager
def pipes_session(
    context: OpExecutionContext,
    context_injector: PipesContextInjector,
    message_reader: PipesMessageReader,
) -> Iterator[PipesSession]:
    """``open_pipes_session`` without the preview warnings of 1.13's message-reader API."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        with open_pipes_session(
            context=context, context_injector=context_injector, message_reader=message_reader
        ) as session:
            yield session
