"""The offline ``.wandb`` reader against real run files written by wandb in offline mode."""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pretrain.errors import DataError
from pretrain.recovery.series import metric_rows
from pretrain.recovery.wandb_file import BLOCK_SIZE, read_history, read_records
from pretrain.run_files import offline_run_files, wandb_run_id
from pretrain.train.config import TrainConfig
from resources.metrics import WandbMetricsReader


def start_offline_run(wandb_dir: Path, run_id: str) -> Any:
    """A real offline W&B run, flushed every second (as the trainer configures it)."""
    os.environ["WANDB_SILENT"] = "true"
    import wandb

    return wandb.init(
        mode="offline",
        dir=str(wandb_dir),
        project="pretrain",
        id=run_id,
        resume="allow",
        settings=wandb.Settings(
            x_transaction_log_flush_interval=1.0, console="off", x_disable_stats=True, silent=True
        ),
    )


def wait_for_rows(path: Path, cursor: int, want_step: int) -> tuple[list[dict], int]:
    """Poll the growing file until ``want_step`` is readable (the writer flushes every second).

    W&B keeps the newest step's row open until a later step is logged (more keys may follow for
    the same step), so step N becomes readable once step N+1 has been logged."""
    rows: list[dict] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists():
            new, cursor = read_history(path, cursor)
            rows += new
            if any(r["_step"] == want_step for r in rows):
                return rows, cursor
        time.sleep(0.2)
    raise AssertionError(f"step {want_step} never appeared in {path}")


def finished_file(wandb_dir: Path, run_id: str, last_step: int) -> Path:
    """The run file once ``last_step`` is in it: ``finish()`` can return before the internal
    writer process has flushed everything when the machine is busy."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        files = offline_run_files(wandb_dir, run_id)
        if files and any(r["_step"] == last_step for r in read_history(files[-1], 0)[0]):
            time.sleep(0.5)  # let the writer close the file (trailing records)
            return files[-1]
        time.sleep(0.2)
    raise AssertionError(f"step {last_step} of {run_id} never reached the run file")


@pytest.fixture(autouse=True)
def finish_wandb_runs() -> Any:
    """A failed test must not leave its run open: the next wandb.init would reuse it."""
    yield
    import wandb

    if wandb.run is not None:
        wandb.run.finish()


def test_incremental_read_while_open_and_after_finish(tmp_path: Path) -> None:
    run = start_offline_run(tmp_path, "b00-incr")
    for step in range(1, 6):
        run.log({"train/loss": 3.0 - step / 10, "train/grad_norm": 1.0}, step=step)
    deadline = time.monotonic() + 60
    while not offline_run_files(tmp_path, "b00-incr"):  # the writer creates it asynchronously
        assert time.monotonic() < deadline, "no run file"
        time.sleep(0.2)
    [path] = offline_run_files(tmp_path, "b00-incr")
    first, cursor = wait_for_rows(path, 0, 4)
    assert [r["_step"] for r in first] == [1, 2, 3, 4]
    assert first[0]["train/loss"] == pytest.approx(2.9)
    assert read_history(path, cursor) == ([], cursor)  # nothing new yet: same cursor
    run.log({"train/loss": float("nan"), "train/skipped": True}, step=6)
    run.log({"train/loss": float("inf")}, step=7)
    run.finish()
    finished_file(tmp_path, "b00-incr", 7)
    rest, end = read_history(path, cursor)
    assert [r["_step"] for r in rest] == [5, 6, 7] and end > cursor
    assert math.isnan(rest[1]["train/loss"]) and rest[1]["train/skipped"] is True
    assert rest[2]["train/loss"] == math.inf
    everything, end_again = read_history(path, 0)
    assert [r["_step"] for r in everything] == list(range(1, 8)) and end_again == end


def test_multi_block_records_and_truncation(tmp_path: Path) -> None:
    run = start_offline_run(tmp_path, "b00-big")
    for step in range(1, 201):
        run.log({"train/loss": 1.0 + step, "note": "x" * 200}, step=step)
    run.log({"train/loss": 0.5, "note": "y" * 70_000}, step=201)  # one record over three blocks
    run.finish()
    path = finished_file(tmp_path, "b00-big", 201)
    data = path.read_bytes()
    assert len(data) > 3 * BLOCK_SIZE
    full, end = read_history(path, 0)
    assert [r["_step"] for r in full] == list(range(1, 202)) and end == len(data)
    assert full[-1]["note"] == "y" * 70_000
    cut_file = tmp_path / "cut.wandb"
    for cut in (7, 1000, BLOCK_SIZE - 3, BLOCK_SIZE + 20, len(data) - 50_000, len(data) - 1):
        cut_file.write_bytes(data[:cut])
        prefix, cursor = read_history(cut_file, 0)
        assert cursor <= cut and prefix == full[: len(prefix)]
        cut_file.write_bytes(data)  # the writer catches up: reading on from the cursor completes it
        rest, _ = read_history(cut_file, cursor)
        assert prefix + rest == full
    offsets = [off for off, _ in read_records(path)[0]]
    assert len(offsets) > 201 and all(b > a for a, b in zip(offsets, offsets[1:], strict=False))


def test_corrupt_record_and_foreign_file_raise(tmp_path: Path) -> None:
    run = start_offline_run(tmp_path, "b00-bad")
    run.log({"train/loss": 2.0}, step=1)
    run.finish()
    path = finished_file(tmp_path, "b00-bad", 1)
    data = bytearray(path.read_bytes())
    offsets = [off for off, _ in read_records(path)[0]]
    data[offsets[2] + 9] ^= 0xFF  # a payload byte of the third record
    bad = tmp_path / "bad.wandb"
    bad.write_bytes(bytes(data))
    with pytest.raises(DataError, match=f"CRC mismatch in the chunk at byte {offsets[2]}"):
        read_history(bad, 0)
    assert read_history(bad, offsets[3])[1] == len(data)  # past the damage reads fine
    (tmp_path / "other.wandb").write_bytes(b"PK\x03\x04not wandb")
    with pytest.raises(DataError, match="not a W&B run file"):
        read_history(tmp_path / "other.wandb", 0)
    (tmp_path / "empty.wandb").write_bytes(b":W&")
    assert read_history(tmp_path / "empty.wandb", 0) == ([], 0)


def test_metrics_reader_follows_a_crash_resumed_branch(tmp_path: Path) -> None:
    run_root = tmp_path / "runs"
    run_id = wandb_run_id(run_root, "b00")
    trainer_view = SimpleNamespace(
        metrics=SimpleNamespace(wandb_run_id=None),
        checkpoint=SimpleNamespace(run_root=str(run_root)),
        run=SimpleNamespace(branch="b00"),
        is_remote=lambda: False,
    )
    assert run_id == TrainConfig.wandb_run_id(trainer_view)  # the trainer's own formula
    on_s3 = SimpleNamespace(**{**vars(trainer_view), "is_remote": lambda: True})
    on_s3.checkpoint = SimpleNamespace(run_root="s3://campaign/artifacts/runs")
    assert TrainConfig.wandb_run_id(on_s3) == wandb_run_id("s3://campaign/artifacts/runs", "b00")
    reader = WandbMetricsReader(run_root=str(run_root))
    run = start_offline_run(run_root, run_id)
    for step in (1, 2, 3):
        run.log({"train/loss": 3.0, "train/tokens_seen": 64 * step}, step=step)
    run.finish()
    finished_file(run_root, run_id, 3)
    rows, cursor = reader.rows_since("b00", None)
    assert [(r.step, r.tokens_seen) for r in rows] == [(1, 64), (2, 128), (3, 192)]
    assert reader.rows_since("b00", cursor) == ([], cursor)
    first_folder = offline_run_files(run_root, run_id)[0].parent
    shutil.move(first_folder, first_folder.with_name("offline-run-20000101_000000-" + run_id))
    run = start_offline_run(run_root, run_id)  # crash-resume: same id, a second folder
    run.log({"train/loss": 2.5, "train/tokens_seen": 256}, step=4)
    run.finish()
    finished_file(run_root, run_id, 4)
    assert len(offline_run_files(run_root, run_id)) == 2
    rows, cursor = reader.rows_since(
        "b00",
        {"files": {"offline-run-20000101_000000-" + run_id: cursor["files"][first_folder.name]}},
    )
    assert [(r.step, r.loss) for r in rows] == [(4, 2.5)]
    assert metric_rows([]) == [] and reader.rows_since("b99", None) == ([], {"files": {}})
