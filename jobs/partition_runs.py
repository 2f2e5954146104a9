"""Run one job per partition, each in a process of its own, a few at a time (a small backfill).

``execute_job`` is not safe in two threads of one process (Dagster's log handlers and
SQLAlchemy's logging can deadlock on the logging module lock), so each run is a child
``python -m jobs.partition_runs MODULE:FACTORY PARTITION`` that prints one JSON line: whether
the run succeeded, how many steps were retried, and the failure reasons. The job comes from a
zero-argument factory (``reconstructable`` needs one), e.g. ``jobs.ray_jobs:shard_pipeline_on_ray``
(steps on a Ray cluster) or any module-level factory of the default definitions::

    results = run_partitions("jobs.ray_jobs:shard_pipeline_on_ray", ["web-0000", "web-0001"])
    results["web-0000"]  # {"success": True, "retries": 0, "failures": [], "run_id": "..."}

The children inherit the environment (``DAGSTER_HOME``, ``PRETRAIN_ROOT``, ...).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import threading
from typing import Any


def run_partitions(
    factory: str, partitions: list[str | None], *, width: int = 2, timeout_s: float = 900.0
) -> dict[str | None, dict[str, Any]]:
    """``{partition: outcome}`` for one run per partition, ``width`` processes at a time."""
    results: dict[str | None, dict[str, Any]] = {}
    pending = list(partitions)
    lock = threading.Lock()

    def drain() -> None:
        while True:
            with lock:
                if not pending:
                    return
                partition = pending.pop(0)
            results[partition] = run_partition(factory, partition, timeout_s=timeout_s)

    threads = [threading.Thread(target=drain, daemon=True) for _ in range(max(1, width))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def run_partition(factory: str, partition: str | None, *, timeout_s: float = 900.0) -> dict:
    """One run in a child process; its outcome (see module docstring)."""
    argv = [sys.executable, "-m", "jobs.partition_runs", factory, partition or ""]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"success"')]
    if done.returncode != 0 or not lines:
        return {"success": False, "retries": 0, "run_id": None,
                "failures": [f"exit {done.returncode}: {done.stderr[-2000:]}"]}  # fmt: skip
    return json.loads(lines[-1])


def _main(factory: str, partition: str) -> None:
    from dagster import DagsterInstance, execute_job, reconstructable

    module, _, name = factory.partition(":")
    job = reconstructable(getattr(importlib.import_module(module), name))
    tags = {"dagster/partition": partition} if partition else {}
    with DagsterInstance.get() as instance, execute_job(job, instance, tags=tags) as result:
        events = result.all_events
        failures = [
            (e.step_failure_data.user_failure_data.description
             if e.step_failure_data.user_failure_data else e.step_failure_data.error.message)
            for e in events if e.is_step_failure
        ]  # fmt: skip
        outcome = {
            "success": result.success,
            "retries": sum(1 for e in events if e.is_step_up_for_retry),
            "failures": failures,
            "run_id": result.run_id,
        }
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
