"""The trainer's event sink when Dagster launched it: events travel back over Pipes.

Loaded by the trainer on rank 0 through ``--event-sink jobs.pipes_sink:PipesEventSink``;
it lives outside ``pretrain/`` so the library never depends on Dagster. Checkpoint and
lifecycle events become Pipes custom messages (the op turns checkpoints into
``checkpoints[<key>]`` materializations); progress events become throttled log lines.
Per-step metrics never come here: they go to W&B and the local metrics file.

The transport follows what the launcher injected: a file or the environment on a shared
filesystem, or S3 (``PipesS3ContextInjector`` + ``PipesS3MessageReader`` on the Dagster side,
``PipesS3ContextLoader`` + ``PipesS3MessageWriter`` here) when the nodes share nothing with
Dagster; the S3 client then comes from the standard AWS variables (``AWS_ENDPOINT_URL``, keys).
"""

from __future__ import annotations

from typing import Any

from dagster_pipes import (
    PipesContext,
    PipesEnvVarParamsLoader,
    PipesS3ContextLoader,
    PipesS3MessageWriter,
    open_dagster_pipes,
)


def open_pipes() -> PipesContext:
    """Open Pipes with the S3 loader/writer when the launcher's parameters name a bucket; the
    writer uploads a chunk of messages as often as the op reads them (the params' ``interval``,
    ``pipes_s3_interval_s`` of the launcher)."""
    params = PipesEnvVarParamsLoader()
    messages = params.load_messages_params()
    if "bucket" not in params.load_context_params() and "bucket" not in messages:
        return open_dagster_pipes()
    import boto3

    client = boto3.client("s3")
    # a reader that does not send its interval (not our launchers'): dagster-pipes' default
    interval = {"interval": float(messages["interval"])} if "interval" in messages else {}
    return open_dagster_pipes(
        context_loader=PipesS3ContextLoader(client),
        message_writer=PipesS3MessageWriter(client, **interval),
    )


class PipesEventSink:
    """``EventSink`` backed by the Dagster Pipes context of the launching op."""

    def __init__(self) -> None:
        self._context: PipesContext = open_pipes()

    def emit(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "progress":
            fields = " ".join(f"{k}={v}" for k, v in event.items() if k != "event")
            self._context.log.info(f"progress {fields}")
            return
        self._context.report_custom_message(event)
        if kind == "checkpoint_damaged":
            self._context.log.warning(
                f"checkpoint {event['path']} is damaged ({'; '.join(event['problems'])}); "
                f"resumed from {event['resumed_from']}"
            )
            return
        self._context.log.info(f"{kind}: {event}")

    def close(self) -> None:
        self._context.close()
