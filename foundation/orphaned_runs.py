"""Runs left STARTED by a process that no longer exists are marked FAILURE, with the reason.

A run executed in process (``make demo``, ``execute_in_process``) or by a local run worker
that is killed with -9 never writes its end event, so run storage shows it STARTED forever
and the UI reports it as running. :func:`fail_orphaned_runs` finds such runs from the pid
that Dagster records on each run's ``RUN_START`` event and reports them failed::

    from dagster import DagsterInstance
    from foundation.orphaned_runs import fail_orphaned_runs
    fail_orphaned_runs(DagsterInstance.get(), by="pretrain status")

``pretrain status`` and the demo call it at start. A pid names a process on *this* machine,
so only runs that provably ran here are judged: runs tagged ``pretrain/host`` with this host
name (the demo tags its runs), or any run when run storage is a local SQLite instance (one
machine by construction). A pid that is alive but belongs to a process started after the run
(pid reuse) counts as gone.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

HOST_TAG = "pretrain/host"


def host_tags() -> dict[str, str]:
    """Tags that mark a run as executed on this machine (for :func:`fail_orphaned_runs`)."""
    return {HOST_TAG: socket.gethostname()}


def fail_orphaned_runs(instance: DagsterInstance, *, by: str) -> list[str]:
    """Report FAILURE for every STARTED run whose process is gone; returns their run ids."""
    failed = []
    for run in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
        if not _ran_here(instance, run.tags):
            continue
        records = instance.get_records_for_run(
            run.run_id, of_type=DagsterEventType.RUN_START, limit=1
        ).records
        entry = records[0].event_log_entry if records else None
        if entry is None or entry.dagster_event is None:
            continue
        pid = entry.dagster_event.pid
        if pid is None or _alive_since(pid, entry.timestamp):
            continue
        instance.report_run_failed(
            run,
            message=(
                f"the process that ran this run (pid {pid} on {socket.gethostname()}) is gone "
                f"without ending it (killed, e.g. with -9); marked failed by {by}"
            ),
        )
        failed.append(run.run_id)
    return failed


def _ran_here(instance: DagsterInstance, tags: Mapping[str, str]) -> bool:
    if HOST_TAG in tags:
        return tags[HOST_TAG] == socket.gethostname()
    storage = type(instance.run_storage).__name__
    return storage in ("SqliteRunStorage", "InMemoryRunStorage")


def _alive_since(pid: int, run_started: float) -> bool:
    """Whether ``pid`` is a live process that already existed when the run started."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    started = _process_start_time(pid)
    return started is None or started <= run_started + 1.0


def _process_start_time(pid: int) -> float | None:
    """Seconds since the epoch at which ``pid`` started (Linux /proc), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime")
        )
    except (OSError, StopIteration):
        return None
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime, after "(comm)"
    return boot + ticks / os.sysconf("SC_CLK_TCK")
