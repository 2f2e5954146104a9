"""Artifacts honour the umask (no 0600 files from mkstemp) and a killed writer's temp files
are swept by the next write (issue 19, items 12 and 18)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pretrain import storage, tmpfiles
from pretrain.tmpfiles import STALE_TMP_AGE_S, sweep_stale_temps_in


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_every_writer_honours_the_umask(tmp_path: Path, umask_027: None) -> None:
    storage.write_bytes(b"x", str(tmp_path / "a.bin"))
    with storage.StreamingTableWriter(
        str(tmp_path / "t.parquet"), pa.schema([("x", pa.int64())])
    ) as writer:
        writer.write_rows([{"x": 1}])
    storage.replace_dir({"f.json": b"{}"}, str(tmp_path / "d"))
    assert _mode(tmp_path / "a.bin") == 0o640
    assert _mode(tmp_path / "t.parquet") == 0o640
    assert _mode(tmp_path / "d") == 0o750
    assert _mode(tmp_path / "d" / "f.json") == 0o640
    assert _mode(tmp_path / "d" / storage.COMMITTED) == 0o640
    os.umask(0o022)
    storage.write_bytes(b"y", str(tmp_path / "a.bin"))
    assert _mode(tmp_path / "a.bin") == 0o644


KILLED_WRITER = """
import os, signal, sys
import pyarrow as pa
from pretrain import storage
writer = storage.StreamingTableWriter(sys.argv[1], pa.schema([("x", pa.int64())]))
writer.write_rows([{"x": i} for i in range(10)])
writer.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_temp_files_of_a_killed_writer_are_swept_by_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tmpfiles, "SWEEP_INTERVAL_S", 0.0)  # else once a minute per folder
    target = tmp_path / "out" / "documents.parquet"
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(target)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL
    [leftover] = list(target.parent.glob(".documents.parquet.*.tmp"))
    assert not target.exists()
    # A fresh temp file may belong to a live writer: it stays until it is stale.
    storage.write_bytes(b"1", str(target))
    assert leftover.exists()
    old = time.time() - STALE_TMP_AGE_S - 1
    os.utime(leftover, (old, old))
    storage.write_bytes(b"2", str(target))
    assert not leftover.exists() and target.read_bytes() == b"2"
    assert list(target.parent.iterdir()) == [target]


def test_stage_start_sweeps_its_output_folder(tmp_path: Path) -> None:
    old = time.time() - STALE_TMP_AGE_S - 1
    names = [".stats.json.abc_1.tmp", ".rejects.parquet.x9.tmp", ".shard.q.old"]
    for name in names:
        (tmp_path / name).write_bytes(b"partial")
        os.utime(tmp_path / name, (old, old))
    (tmp_path / ".documents.parquet.live.tmp").write_bytes(b"being written")
    (tmp_path / "documents.parquet").write_bytes(b"kept")
    removed = sweep_stale_temps_in(str(tmp_path))
    assert sorted(p.name for p in removed) == sorted(names)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".documents.parquet.live.tmp",
        "documents.parquet",
    ]
