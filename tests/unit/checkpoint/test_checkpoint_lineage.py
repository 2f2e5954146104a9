"""Rollback candidates along a branch's lineage on a local run root, and the URI helpers they
use (``pretrain/checkpoint/health.py``, ``pretrain/storage.py``). The same on S3:
``tests/unit/checkpoint/test_checkpoint_s3.py``; through the sensors: ``tests/faults/test_sensors_recovery.py``.

    pytest -q tests/unit/checkpoint/test_checkpoint_lineage.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pretrain import storage
from pretrain.checkpoint.health import lineage_checkpoints
from pretrain.errors import CheckpointError
from tests.helpers.checkpoints import committed_step


def keys(root: Path | str, branch: str, resume_path: str | None = None) -> list[str]:
    return [i.key for i in lineage_checkpoints(root, branch, resume_path=resume_path)]


def test_a_fork_brings_the_parents_checkpoints_up_to_the_fork(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    committed_step(root, "b00", 4)
    fork = committed_step(root, "b00", 8)
    committed_step(root, "b00", 12)  # after the fork point
    committed_step(root, "b01", 10, parent=fork)
    committed_step(root, "b02", 14, parent=committed_step(root, "b01", 12, parent=fork))
    assert keys(root, "b02") == [
        "b00-s000000004", "b00-s000000008", "b01-s000000010", "b01-s000000012",
        "b02-s000000014",
    ]  # fmt: skip
    infos = lineage_checkpoints(str(root), "b01")
    assert [i.path for i in infos] == [
        str(root / "b00" / "step-00000004"), fork,
        str(root / "b01" / "step-00000010"), str(root / "b01" / "step-00000012"),
    ]  # fmt: skip
    assert all(isinstance(i.path, str) for i in infos)


def test_a_branch_without_checkpoints_forks_at_its_resume_path(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    committed_step(root, "b00", 4)
    fork = committed_step(root, "b00", 8)
    assert keys(root, "b01", resume_path=fork) == ["b00-s000000004", "b00-s000000008"]
    assert keys(root, "b01") == []


def test_the_run_root_is_the_same_however_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative and absolute spellings of one root are the same root."""
    monkeypatch.chdir(tmp_path)
    fork = committed_step(tmp_path / "runs", "b00", 8)
    committed_step(Path("runs"), "b01", 10, parent=fork)  # absolute parent, relative root
    assert keys("runs", "b01") == ["b00-s000000008", "b01-s000000010"]
    assert keys("./runs/", "b01") == ["b00-s000000008", "b01-s000000010"]


def test_a_fork_from_another_run_root_is_not_a_rollback_target(tmp_path: Path) -> None:
    other = committed_step(tmp_path / "other-runs", "b00", 8)
    committed_step(tmp_path / "runs", "b01", 10, parent=other)
    assert keys(tmp_path / "runs", "b01") == ["b01-s000000010"]


def test_a_lineage_that_loops_is_an_error(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    committed_step(root, "b00", 8, parent=str(root / "b01" / "step-00000006"))
    committed_step(root, "b01", 6, parent=str(root / "b00" / "step-00000008"))
    with pytest.raises(CheckpointError, match="loops back to branch 'b01'"):
        lineage_checkpoints(root, "b01")


def test_uri_helpers_never_go_through_path() -> None:
    assert storage.parent("s3://bucket/runs/b00/step-00000008") == "s3://bucket/runs/b00"
    assert storage.parent("s3://bucket/runs/") == "s3://bucket"
    assert storage.parent("runs/b00") == "runs" and storage.parent("runs") == "."
    assert storage.parent("/data/runs/b00") == "/data/runs"
    with pytest.raises(ValueError, match="is a bucket"):
        storage.parent("s3://bucket")
    assert storage.basename("s3://bucket/runs/b00/") == "b00"
    assert storage.basename("runs/b00/step-00000008") == "step-00000008"
    assert storage.same_location("s3://bucket/runs/", "s3://bucket/runs")
    assert not storage.same_location("s3://bucket/runs", "s3:/bucket/runs")
    assert not storage.same_location("s3://bucket/runs", "runs")
