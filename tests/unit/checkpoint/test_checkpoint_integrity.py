"""Damaged checkpoints are caught before loading (issue 19 items 14 and 16).

A 12-step run writes checkpoints at steps 4, 8 and 12; each test damages a copy of it. Truncated,
deleted and bit-flipped shards and a missing ``.metadata`` are found from the commit record's sizes
and checksums before torch reads them, and ``resume=latest`` continues from step 8, reproducing
the undamaged run's losses bit for bit. An RNG file holding a pickled object is refused.

    .venv/bin/pytest -q tests/unit/checkpoint/test_checkpoint_integrity.py     # ~15 s on 2 cores
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from app.cli import main as cli_main
from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from pretrain.checkpoint import integrity
from pretrain.errors import CheckpointError
from pretrain.train.events import FanoutSink, JsonlEventSink
from tests.helpers.checkpoints import flip_4k
from tests.helpers.training import losses, make_config, make_packed, run

STEP12 = "b00/step-00000012"


class ListSink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


# every test reads checkpoints trained here (12 steps, 3 DCP saves), most resume training
# from them: the slow tier (`make test`)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(packed dir, run root with committed checkpoints at steps 4, 8, 12)."""
    base = tmp_path_factory.mktemp("integrity")
    packed = make_packed(base / "packed_tokens")
    run(make_config(packed, base / "runs"))
    return packed, base / "runs"


@pytest.fixture
def copy(trained: tuple[Path, Path], tmp_path: Path) -> Path:
    shutil.copytree(trained[1], tmp_path / "runs")
    return tmp_path / "runs"


def shard(ckpt_dir: Path) -> Path:
    return ckpt_dir / "__0_0.distcp"


def truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def test_commit_record_lists_every_file_with_size_and_checksum(trained: tuple[Path, Path]) -> None:
    step12 = trained[1] / STEP12
    record = ckpt.read_commit_record(step12)
    on_disk = {p.name for p in step12.iterdir()} - {storage.COMMITTED, ckpt.HEALTHY}
    assert set(record["files"]) == on_disk
    assert {".metadata", "__0_0.distcp", "meta.json", "rng-rank00000.pt"} <= on_disk
    assert record["checksum"] == "xxh3_64"
    for name, entry in record["files"].items():
        assert entry == integrity.digest_file(step12 / name)
        assert entry["size"] == (step12 / name).stat().st_size
    assert ckpt.checkpoint_problems(step12) == []


DAMAGES = [
    (lambda d: truncate(shard(d)), r"__0_0.distcp: \d+ bytes, the commit record says \d+"),
    (lambda d: shard(d).unlink(), "__0_0.distcp: missing"),
    (lambda d: flip_4k(shard(d)), "__0_0.distcp: xxh3_64 .* the commit record says"),
    (lambda d: (d / ".metadata").unlink(), ".metadata: missing"),
]


@pytest.mark.parametrize(
    ("damage", "problem"), DAMAGES, ids=["truncated", "deleted", "bit-flipped-4KiB", "no-.metadata"]
)
def test_damaged_latest_is_detected_and_the_previous_checkpoint_used(
    trained: tuple[Path, Path],
    copy: Path,
    damage: Any,
    problem: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    packed, intact = trained
    damage(copy / STEP12)
    problems = ckpt.checkpoint_problems(copy / STEP12)
    assert len(problems) == 1 and re.search(problem, problems[0]), problems
    with pytest.raises(CheckpointError, match="is damaged"):  # refused before torch reads it
        ckpt.load_consolidated_model(str(copy / STEP12))

    sink, cfg = ListSink(), make_config(packed, copy)
    jsonl = JsonlEventSink(cfg.events_path())  # as the CLI writes it, for `pretrain status`
    try:
        result = run(cfg, events=FanoutSink([sink, jsonl]))  # resume="latest"
    finally:
        jsonl.close()
    damaged = [e for e in sink.events if e["event"] == "checkpoint_damaged"]
    assert len(damaged) == 1 and damaged[0]["step"] == 12
    assert damaged[0]["resumed_from"] == str(copy / "b00" / "step-00000008")
    assert re.search(problem, damaged[0]["problems"][0])
    started = next(e for e in sink.events if e["event"] == "started")
    assert started["start_step"] == 8
    # the damaged folder is kept aside for inspection, out of the step-* namespace
    assert (copy / "b00" / ".damaged-step-00000012").is_dir()
    assert result.step == 12 and ckpt.checkpoint_problems(copy / STEP12) == []
    if damage is DAMAGES[0][0]:  # once is enough: `pretrain status` shows what resume passed over
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
        assert cli_main(["status", "--root", str(copy.parent)]) == 0
        out = capsys.readouterr().out
        assert "b00: DAMAGED checkpoint step 12 passed over (__0_0.distcp:" in out
        assert "resumed from " + str(copy / "b00" / "step-00000008") in out
    # steps 9-12 retrained from step 8 reproduce the undamaged run exactly
    assert {s: losses(copy)[s] for s in range(9, 13)} == {
        s: losses(intact)[s] for s in range(9, 13)
    }


def test_no_intact_checkpoint_or_a_damaged_explicit_choice_raises(
    trained: tuple[Path, Path], copy: Path
) -> None:
    packed = trained[0]
    flip_4k(shard(copy / "b00" / "step-00000008"))
    with pytest.raises(CheckpointError, match="step-00000008 is damaged: __0_0.distcp: xxh3_64"):
        run(make_config(packed, copy, resume=str(copy / "b00" / "step-00000008"), branch="b01"))
    for step in (4, 12):
        truncate(shard(copy / "b00" / f"step-{step:08d}"))
    with pytest.raises(CheckpointError, match="no intact checkpoint to resume from"):
        run(make_config(packed, copy))


class _RunsCode:
    """Unpickling this calls ``Path.touch``: what an attacker's object would do instead."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_rng_state_loads_weights_only_and_a_pickled_object_is_refused(
    trained: tuple[Path, Path], copy: Path, tmp_path: Path
) -> None:
    packed = trained[0]
    step12 = copy / STEP12
    state = torch.load(step12 / "rng-rank00000.pt", weights_only=True)  # plain data + tensors
    assert set(state) == {"python", "numpy", "torch"}
    # someone with write access plants an object and rewrites the commit record to match
    marker = tmp_path / "code-ran"
    torch.save({**state, "numpy": _RunsCode(marker)}, step12 / "rng-rank00000.pt")
    record = ckpt.read_commit_record(step12)
    record["files"].update(integrity.digest_files(step12, ["rng-rank00000.pt"]))
    storage.write_json(record, str(step12 / storage.COMMITTED))
    assert ckpt.checkpoint_problems(step12) == []
    with pytest.raises(CheckpointError, match="refused: loading it could run code"):
        run(make_config(packed, copy))
    assert not marker.exists()


def test_dcp_metadata_with_a_pickled_object_is_refused(
    trained: tuple[Path, Path], copy: Path, tmp_path: Path
) -> None:
    """DCP unpickles ``.metadata`` with plain pickle; ours allows only DCP's own types."""
    step12 = copy / STEP12
    meta_file = step12 / ".metadata"
    # the genuine metadata loads through the allowlist
    assert ckpt.load_consolidated_model(str(step12)) is not None
    marker = tmp_path / "code-ran"
    meta_file.write_bytes(pickle.dumps(_RunsCode(marker)))
    record = ckpt.read_commit_record(step12)
    record["files"].update(integrity.digest_files(step12, [".metadata"]))
    storage.write_json(record, str(step12 / storage.COMMITTED))
    with pytest.raises(CheckpointError, match=r"refers to pathlib.Path.touch|refusing to unpickle"):
        ckpt.load_consolidated_model(str(step12))
    with pytest.raises(CheckpointError, match="refusing to unpickle"):
        run(make_config(trained[0], copy))
    assert not marker.exists()
