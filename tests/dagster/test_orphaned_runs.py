"""A run whose process was killed with -9 stays STARTED until the next ``pretrain`` start
marks it failed with the reason (issue 19, item 12)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from foundation.orphaned_runs import fail_orphaned_runs, host_tags

KILLED_RUN = """
import os, signal, sys
from dagster import DagsterInstance, job, op

@op
def die():
    os.kill(os.getpid(), signal.SIGKILL)

@job
def doomed():
    die()

doomed.execute_in_process(instance=DagsterInstance.get(), tags=dict(a.split("=", 1) for a in sys.argv[1:]))
"""


def _killed_run(home: Path, *tags: str) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, *tags], env=env, timeout=120, check=False
    )
    assert proc.returncode == -signal.SIGKILL


def test_killed_in_process_run_is_marked_failed_with_a_reason(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    [(key, value)] = host_tags().items()
    _killed_run(home, f"{key}={value}")
    _killed_run(home, f"{key}=some-other-machine")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.get() as instance:
        started = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        assert len(started) == 2
        [failed] = fail_orphaned_runs(instance, by="pretrain status")
        run = instance.get_run_by_id(failed)
        assert run.status == DagsterRunStatus.FAILURE and run.tags[key] == value
        messages = [e.message for e in instance.all_logs(failed) if e.dagster_event]
        assert any("is gone without ending it" in m and "pretrain status" in m for m in messages)
        other = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        assert [r.tags[key] for r in other] == ["some-other-machine"]  # not ours to judge
        assert fail_orphaned_runs(instance, by="again") == []
