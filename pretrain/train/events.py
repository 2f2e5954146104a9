"""Lifecycle events: what the trainer tells its orchestrator (rank 0 only).

Events are small dicts, a handful per run plus a throttled progress line — never per-step rows
(those go to metrics). The trainer emits, in order::

    {"event": "started",    "branch", "start_step", "max_steps", "world_size", "num_params",
                            "resumed_from"}
    {"event": "progress",   "step", "loss", "tokens_per_s"}           throttled, see below
    {"event": "skipped",    "start_step", "end_step", "num_sequences"}  per skip window run through
    {"event": "checkpoint_damaged", "branch", "step", "path", "moved_to", "problems",
                            "resumed_from"}   resume=latest passed over a damaged checkpoint
    {"event": "checkpoint", "branch", "step", "key", "path", "loss", "tokens_seen"} after commit
    {"event": "finished",   "step", "final_loss", "tokens_seen"}
    {"event": "stopped",    "step", "signal"}                          SIGTERM/SIGINT received
    {"event": "failed",     "error"}                                   exception, then re-raised

A sink is anything with ``emit(event)`` and ``close()``. ``events.jsonl`` under the branch
folder is always written (:class:`JsonlEventSink`); ``--event-sink module:Class`` adds one more
sink, imported by path and built with no arguments (the Dagster layer passes a Pipes-backed
sink from outside ``pretrain/``)::

    python -m pretrain.train --config run.json --event-sink jobs.pipes_sink:PipesEventSink
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pretrain.errors import ConfigError


@runtime_checkable
class EventSink(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


class NullSink:
    """What non-zero ranks get."""

    def emit(self, event: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


class JsonlEventSink:
    """One JSON object per line, appended, each stamped with wall-clock ``time``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", buffering=1)

    def emit(self, event: dict[str, Any]) -> None:
        self._file.write(json.dumps({**event, "time": time.time()}, default=str) + "\n")

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


class FanoutSink:
    """Send each event to several sinks; close them all even if one fails."""

    def __init__(self, sinks: list[EventSink]) -> None:
        self.sinks = sinks

    def emit(self, event: dict[str, Any]) -> None:
        for sink in self.sinks:
            sink.emit(event)

    def close(self) -> None:
        errors = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # close the rest, then report the first failure
                errors.append(exc)
        if errors:
            raise errors[0]


def load_sink(spec: str) -> EventSink:
    """Instantiate ``"package.module:ClassName"`` with no arguments."""
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ConfigError(f"--event-sink {spec!r} must look like 'package.module:ClassName'")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import event sink {spec!r}: {exc}") from exc
    sink = cls()
    if not isinstance(sink, EventSink):
        raise ConfigError(f"event sink {spec!r} needs emit(event: dict) and close() methods")
    return sink


class ProgressThrottle:
    """Let a progress event through when >= ``every_steps`` steps and >= ``min_interval_s``
    seconds have passed since the last one (the first step always passes)."""

    def __init__(
        self,
        every_steps: int,
        min_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_steps, self.min_interval_s, self.clock = every_steps, min_interval_s, clock
        self._last_step: int | None = None
        self._last_time = 0.0

    def ready(self, step: int) -> bool:
        now = self.clock()
        if self._last_step is not None and (
            step - self._last_step < self.every_steps or now - self._last_time < self.min_interval_s
        ):
            return False
        self._last_step, self._last_time = step, now
        return True
