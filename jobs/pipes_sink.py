"""The trainer's event sink when Dagster launched it: events travel back over Pipes.

Loaded by the trainer on rank 0 through ``--event-sink jobs.pipes_sink:PipesEventSink``;
it lives outside ``pretrain/`` so the library never depends on Dagster. Checkpoint and
lifecycle events become Pipes custom messages (the op turns checkpoints into
``checkpoints[<key>]`` materializations); progress events become throttled log lines.
Per-step metrics never come here: they go to W&B and the local metrics file.
"""

from __future__ import annotations

from typing import Any

from dagster_pipes import PipesContext, open_dagster_pipes


class PipesEventSink:
    """``EventSink`` backed by the Dagster Pipes context of the launching op."""

    def __init__(self) -> None:
        self._context: PipesContext = open_dagster_pipes()

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
