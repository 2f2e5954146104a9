"""Every sensor's ticks on a campaign, counted: wall time, SQL statements, artifact-store reads.

Used by ``tests/dagster/test_sensor_reads.py`` (bounded reads at any size) and
``bench/control_plane_scale.py`` (the same ticks at 1,000 and 10,000 shard groups)::

    with Counting() as counts:
        ticks = tick_every_sensor(instance, defs, resources, counts, changed={...})
    ticks["experiment_sensor"]["idle"]   # {"s": 0.01, "sql": 14, "store": 0, "requests": 0}

Artifact-store reads are calls of ``pretrain.storage``'s reading functions (``exists``,
``read_bytes``, ``read_json``, ``read_table``, ``list_files``, ``iter_table_batches``): every
module reads the store through them. SQL statements are counted on every SQLAlchemy engine
(SQLite and Postgres alike).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

READS = (
    "exists",
    "read_bytes_if_any",
    "read_table",
    "list_files",
    "iter_table_batches",
)  # one each a file


class Counting:
    """Counts SQL statements and store reads while open (the real functions, wrapped)."""

    def __init__(self) -> None:
        self.sql = 0
        self.store = 0
        self._lock = threading.Lock()
        self._originals: dict[str, Callable[..., Any]] = {}

    def _count_sql(self, *_: Any) -> None:
        with self._lock:
            self.sql += 1

    def __enter__(self) -> Counting:
        import sqlalchemy
        from sqlalchemy import event

        from pretrain import storage

        event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", self._count_sql)
        for name in READS:
            original = self._originals[name] = getattr(storage, name)

            def counted(*args: Any, _f: Callable[..., Any] = original, **kwargs: Any) -> Any:
                self.store += 1
                return _f(*args, **kwargs)

            setattr(storage, name, counted)
        return self

    def __exit__(self, *_: Any) -> None:
        import sqlalchemy
        from sqlalchemy import event

        from pretrain import storage

        event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", self._count_sql)
        for name, original in self._originals.items():
            setattr(storage, name, original)

    @contextlib.contextmanager
    def measure(self, extra: Callable[[], int] | None = None) -> Iterator[dict[str, Any]]:
        """``m["s"]``, ``m["sql"]``, ``m["store"]`` of the block (``extra``: another counter,
        e.g. the S3 requests a server logged, reported as ``m["s3"]``)."""
        out: dict[str, Any] = {}
        sql, store, other = self.sql, self.store, extra() if extra else 0
        started = time.perf_counter()
        try:
            yield out
        finally:
            out["s"] = round(time.perf_counter() - started, 3)
            out["sql"] = self.sql - sql
            out["store"] = self.store - store
            if extra:
                out["s3"] = extra() - other


def tick_every_sensor(
    instance: Any,
    defs: Any,
    resources: dict[str, Any],
    counts: Counting,
    changed: dict[str, Callable[[], None]] | None = None,
    extra: Callable[[], int] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Sensor -> {"first": no cursor, "idle": its cursor, nothing new, "changed": after
    ``changed[sensor]()`` made something new} -> the tick's counts (and its run requests, or
    the error it raised)."""
    repo = defs.get_repository_def()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for sensor in repo.sensor_defs:
        needed = {k: resources[k] for k in sensor.required_resource_keys}
        ticks: dict[str, dict[str, Any]] = {}
        cursor = None
        for phase in ("first", "idle", *(("changed",) if sensor.name in (changed or {}) else ())):
            if phase == "changed":
                (changed or {})[sensor.name]()
            m, cursor = _tick(sensor, instance, repo, needed, cursor, counts, extra)
            parts = [m]
            while phase == "first" and _looking(cursor) and "error" not in m:  # a look in parts
                m, cursor = _tick(sensor, instance, repo, needed, cursor, counts, extra)
                parts.append(m)
            ticks[phase] = _summed(parts) if len(parts) > 1 else parts[0]
        out[sensor.name] = ticks
    return out


def _tick(sensor: Any, instance: Any, repo: Any, resources: dict[str, Any], cursor: str | None,
          counts: Counting, extra: Callable[[], int] | None) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    from dagster import build_sensor_context

    with build_sensor_context(instance=instance, repository_def=repo, cursor=cursor,
                              resources=resources) as context:  # fmt: skip
        with counts.measure(extra) as m:
            try:
                data = sensor.evaluate_tick(context)
                m["requests"] = len(data.run_requests or [])
                cursor = data.cursor if data.cursor is not None else cursor
            except Exception as exc:  # a tick that raises is a result too
                m["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return m, cursor


def _looking(cursor: str | None) -> bool:
    """Whether ``cursor`` is that of a first look still in parts (experiment_sensor's)."""
    return bool(cursor) and '"first_look"' in str(cursor)


def _summed(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A first look of several ticks: the totals, the number of ticks and the longest."""
    total: dict[str, Any] = {k: sum(p.get(k, 0) for p in parts)
                             for k in parts[0] if isinstance(parts[0][k], int | float)}  # fmt: skip
    total["s"] = round(total["s"], 3)
    total.update(ticks=len(parts), longest_tick_s=max(p["s"] for p in parts))
    return total
