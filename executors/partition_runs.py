"""Run one job per partition, each in a process of its own, a few at a time (a small backfill).

``execute_job`` is not safe in two threads of one process (Dagster's log handlers and
SQLAlchemy's logging can deadlock on the logging module lock), so each run is a process of its
own. Importing Dagster and building our definitions takes 3-5 s on a loaded 2-core machine, so
the runs are not fresh interpreters: one server process (``python -m executors.partition_runs``)
imports a job's module and builds the job once, then ``fork``s a child per partition
(``width`` at a time; the server holds no thread, no instance and no Ray connection, so the
fork is clean). Each child runs ``execute_job`` and reports whether the run succeeded, how
many steps were retried, and the failure reasons. The job comes from a zero-argument factory
(``reconstructable`` needs one), e.g. ``app.ray_definitions:filtered_shards_on_ray`` (steps on a Ray
cluster) or any module-level factory of the default definitions::

    results = run_partitions("app.ray_definitions:filtered_shards_on_ray", ["web-0000", "web-0001"])
    results["web-0000"]  # {"success": True, "retries": 0, "failures": [], "run_id": "..."}

    with PartitionRunner() as runner:  # one server for several stages: imports paid once
        runner.run("app.ray_definitions:raw_shards_on_ray", keys)
        runner.run("app.ray_definitions:filtered_shards_on_ray", keys)

The server inherits the environment (``DAGSTER_HOME``, ``PRETRAIN_ROOT``, ...) when it starts.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagster import DagsterEvent

Outcome = dict[str, Any]
DONE = '{"batch_done"'


class PartitionRunner:
    """A running server; ``run`` one batch of partitions after another (see module docstring)."""

    def __init__(self) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._server = subprocess.Popen(
            [sys.executable, "-m", "executors.partition_runs"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._stderr, text=True,
        )  # fmt: skip

    def run(
        self, factory: str, partitions: list[str | None], *, width: int = 2,
        timeout_s: float = 900.0,
    ) -> dict[str | None, Outcome]:  # fmt: skip
        """``{partition: outcome}`` for one run per partition, ``width`` runs at a time."""
        assert self._server.stdin is not None and self._server.stdout is not None
        request = {"factory": factory, "partitions": partitions, "width": max(1, width),
                   "timeout_s": timeout_s}  # fmt: skip
        results: dict[str | None, Outcome] = {}
        try:
            self._server.stdin.write(json.dumps(request) + "\n")
            self._server.stdin.flush()
            for line in self._server.stdout:
                if line.startswith(DONE):
                    break
                if line.startswith('{"partition"'):
                    outcome = json.loads(line)
                    results[outcome.pop("partition")] = outcome
        except BrokenPipeError:
            pass
        for partition in partitions:
            results.setdefault(partition, {
                "success": False, "retries": 0, "run_id": None,
                "failures": [f"partition server: {self._stderr_tail()}"],
            })  # fmt: skip
        return results

    def _stderr_tail(self) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 2000))
        return self._stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self._server.stdin is not None:
            self._server.stdin.close()
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait()
        self._stderr.close()

    def __enter__(self) -> PartitionRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_partitions(
    factory: str, partitions: list[str | None], *, width: int = 2, timeout_s: float = 900.0
) -> dict[str | None, Outcome]:
    """One batch on a server of its own (see ``PartitionRunner`` for several)."""
    with PartitionRunner() as runner:
        return runner.run(factory, partitions, width=width, timeout_s=timeout_s)


def _run(factory: str, partition: str | None) -> Outcome:
    from dagster import DagsterInstance, execute_job, reconstructable

    module, _, name = factory.partition(":")
    job = reconstructable(getattr(importlib.import_module(module), name))
    tags = {"dagster/partition": partition} if partition else {}
    with DagsterInstance.get() as instance, execute_job(job, instance, tags=tags) as result:
        events = result.all_events
        failures = [_failure_text(e) for e in events if e.is_step_failure]
        return {
            "success": result.success,
            "retries": sum(1 for e in events if e.is_step_up_for_retry),
            "failures": failures,
            "run_id": result.run_id,
        }


def _failure_text(event: DagsterEvent) -> str | None:
    """A step failure's user description, else its error's message (Dagster always sets one)."""
    data = event.step_failure_data
    if data.user_failure_data:
        return data.user_failure_data.description
    return data.error.message if data.error else None


def _fork_run(factory: str, partition: str | None, out: Path) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        out.write_text(json.dumps(_run(factory, partition)))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no interpreter teardown: the run's outcome is already stored


def _batch(request: dict[str, Any], folder: Path) -> None:
    factory, width, timeout_s = request["factory"], request["width"], request["timeout_s"]
    module, _, name = factory.partition(":")
    getattr(importlib.import_module(module), name)()  # every child starts with the job built
    pending = list(enumerate(request["partitions"]))
    running: dict[int, tuple[str | None, float, Path]] = {}
    while pending or running:
        while pending and len(running) < width:
            index, partition = pending.pop(0)
            out = folder / f"{time.monotonic_ns()}-{index}.json"
            running[_fork_run(factory, partition, out)] = (partition, time.monotonic(), out)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for child, (_, started, _) in running.items():
                if time.monotonic() - started > timeout_s:
                    os.kill(child, signal.SIGKILL)
            time.sleep(0.05)
            continue
        partition, _, out = running.pop(pid)
        if out.exists():
            outcome = json.loads(out.read_text())
        else:
            outcome = {"success": False, "retries": 0, "run_id": None,
                       "failures": [f"run process ended with status {status}"]}  # fmt: skip
        print(json.dumps({"partition": partition, **outcome}), flush=True)


def _serve() -> None:
    import dagster  # noqa: F401 (loaded before any fork, not in each child)

    with tempfile.TemporaryDirectory() as folder:
        for line in sys.stdin:
            try:
                _batch(json.loads(line), Path(folder))
            except Exception:
                traceback.print_exc()  # the client reports the stderr tail per partition
            print(json.dumps({"batch_done": True}), flush=True)


if __name__ == "__main__":
    _serve()
