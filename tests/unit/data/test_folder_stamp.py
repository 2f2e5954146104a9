"""A local source's folder stamp: the discovery sensor's idle look without a listing.

.venv/bin/pytest -q tests/unit/data/test_folder_stamp.py
"""

import os
import time
from pathlib import Path

from pretrain.data.discovery import (
    FolderStamp,
    cursor_digest,
    discovery_cursor,
    unchanged_since,
)


def _aged(*folders: Path, seconds: int = 60) -> None:
    """Folders last changed ``seconds`` ago (a stamp ignores folders changed just now)."""
    at = time.time() - seconds
    for folder in folders:
        os.utime(folder, (at, at))


def test_a_stamp_moves_when_a_file_arrives_in_any_folder(tmp_path: Path) -> None:
    sub = tmp_path / "2026" / "12"
    sub.mkdir(parents=True)
    (tmp_path / "a.jsonl").write_text("{}\n")
    (sub / "b.jsonl").write_text("{}\n")
    _aged(tmp_path, tmp_path / "2026", sub)
    stamp = FolderStamp.take(str(tmp_path))
    assert stamp is not None and len(stamp.folders) == 3 and stamp.same()
    (tmp_path / "a.jsonl").write_text('{"text": "longer now"}\n')  # same names: same stamp
    assert stamp.same()
    (sub / "c.jsonl").write_text("{}\n")  # a new file two folders down
    assert not stamp.same()


def test_an_empty_folder_that_later_gets_files_is_watched(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "later").mkdir()
    _aged(tmp_path, tmp_path / "later")
    stamp = FolderStamp.take(str(tmp_path))
    assert stamp is not None and str(tmp_path / "later") in stamp.folders
    (tmp_path / "later" / "b.jsonl").write_text("{}\n")
    assert not stamp.same()


def test_no_stamp_for_s3_a_file_or_a_folder_changed_just_now(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("{}\n")
    assert FolderStamp.take("s3://bucket/crawl") is None
    assert FolderStamp.take(str(tmp_path / "a.jsonl")) is None
    assert FolderStamp.take(str(tmp_path)) is None  # written this second: list again next time
    _aged(tmp_path)
    assert FolderStamp.take(str(tmp_path)) is not None


def test_a_link_loop_is_stamped_once_and_a_removed_folder_is_a_change(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "loop").symlink_to(tmp_path)
    _aged(tmp_path, tmp_path / "sub")
    stamp = FolderStamp.take(str(tmp_path))
    assert stamp is not None and len(stamp.folders) == 2
    (tmp_path / "sub" / "loop").unlink()
    (tmp_path / "sub").rmdir()
    assert not stamp.same()


def test_cursors_old_and_new(tmp_path: Path) -> None:
    _aged(tmp_path)
    stamp = FolderStamp.take(str(tmp_path))
    src = str(tmp_path)
    cursor = discovery_cursor("d1", stamp, src, [])
    assert cursor_digest(cursor) == "d1" and unchanged_since(cursor, src)
    assert not unchanged_since(cursor, "/data/another-source")  # ShardSource.uri changed
    assert cursor_digest("d0") == "d0" and not unchanged_since("d0", src)  # a digest: list
    assert not unchanged_since(None, src)
    assert not unchanged_since(discovery_cursor("d1", None, src, []), src)
    (tmp_path / "new.jsonl").write_text("{}\n")
    assert not unchanged_since(cursor, src)
