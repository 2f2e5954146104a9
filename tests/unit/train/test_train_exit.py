"""A finished 2-rank run leaves no process-group thread behind when the trainer exits.

A gloo group still alive when a worker exits lets its native threads run while ``exit()``
destroys C++ statics, and the worker can end in "terminate called without an active exception"
(SIGABRT) after a finished run. After FSDP2 training, ``destroy_process_group()`` alone left the
group alive (DTensor's caches keep the device mesh, which holds the group; the finished model
holds it from reference cycles): ``pretrain.distributed.close_process_group`` releases both.
This test runs the trainer through ``tests/helpers/exit_probe.py``, which records the threads
still running after ``main()`` returned, and fails if a gloo thread is among them.

    pytest -q tests/unit/train/test_train_exit.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.training import REPO, TRAINER_ENV, make_config, make_packed

pytestmark = pytest.mark.slow
GLOO_THREADS = ("gloo", "pt_gloo")  # gloo's tcp loop, the process group's work threads


@pytest.mark.parametrize("async_save", [False, True])
def test_finished_run_exits_with_no_process_group_thread_left(
    tmp_path: Path, async_save: bool
) -> None:
    cfg = make_config(make_packed(tmp_path / "packed"), tmp_path / "runs", max_steps=4, every=2)
    cfg = cfg.replace(checkpoint=dataclasses.replace(cfg.checkpoint, async_save=async_save))
    (tmp_path / "run.json").write_text(cfg.to_json())
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc_per_node=2",
         "-m", "tests.helpers.exit_probe", "--config", str(tmp_path / "run.json")],
        cwd=REPO, env={**os.environ, **TRAINER_ENV, "EXIT_PROBE_DIR": str(probe)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert "terminate called" not in done.stderr
    for rank in (0, 1):
        record = json.loads((probe / f"rank-{rank}.json").read_text())
        assert record["exit_code"] == 0
        left = [t for t in record["threads"] if t.startswith(GLOO_THREADS)]
        assert left == [], f"rank {rank} exits with process-group threads running: {left}"
        assert "python" in record["threads"]  # the record lists this process's own threads
