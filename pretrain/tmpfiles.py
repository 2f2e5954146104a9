"""Temporary files of atomic writes: created with the umask's mode, and swept when stale.

``tempfile.mkstemp`` makes 0600 files (``mkdtemp`` 0700 folders) whatever the umask; every
artifact written through :mod:`pretrain.storage` is a renamed temp file, so without
:func:`honour_umask` colleagues on a shared filesystem could not read any of them. A writer
killed with -9 leaves its ``.<name>.<random>.tmp`` behind; the next atomic write into the same
folder removes every leftover untouched for 10 minutes (:func:`sweep_before_write`, at most
once a minute per folder and process), and a stage can sweep its whole output
folder at start (:func:`sweep_stale_temps_in`)::

    from pretrain.tmpfiles import sweep_stale_temps_in
    removed = sweep_stale_temps_in(".pretrain/artifacts/filtered_shards/web-0000")
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

STALE_TMP_AGE_S = 600.0  # a temp file or folder untouched this long is a crashed writer's leftover
SWEEP_INTERVAL_S = 60.0  # a folder is scanned at most this often per process by writers
_last_sweep: dict[str, float] = {}  # folder → when this process last swept it


def sweep_before_write(target: Path) -> None:
    """What every atomic write calls: sweep the target's folder, at most once a minute.

    Scanning a folder costs time in its number of entries, and a stage may write thousands
    of files into one folder (``manifests/``): once a minute keeps that linear overall.
    """
    folder = str(target.parent)
    now = time.monotonic()
    if now - _last_sweep.get(folder, -SWEEP_INTERVAL_S) < SWEEP_INTERVAL_S:
        return
    _last_sweep[folder] = now
    sweep_stale_temps_in(folder)


def current_umask() -> int:
    """The process umask (``Umask:`` in /proc where Linux has it; else set-and-restore)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def honour_umask(path: str | Path, *, directory: bool = False, fd: int | None = None) -> None:
    """Give a ``mkstemp``/``mkdtemp`` result the mode a plain ``open``/``mkdir`` would have.

    ``tempfile`` creates 0600 files and 0700 folders whatever the umask, so artifacts renamed
    into place from them would be private to their writer; on a shared filesystem colleagues
    and the Dagster daemon running as another user could not read them.
    """
    mode = (0o777 if directory else 0o666) & ~current_umask()
    if fd is not None:
        os.fchmod(fd, mode)
    else:
        os.chmod(path, mode)


def sweep_stale_temps(target: Path, min_age_s: float = STALE_TMP_AGE_S) -> list[Path]:
    """Remove the leftovers of earlier writes of ``target`` that crashed or were killed.

    Our temporary names are ``.<target name>.<random>.tmp`` (and ``.old`` for a swapped-out
    folder) beside the target. One whose newest modification is older than ``min_age_s``
    belongs to no live writer (a live one keeps writing), so it is deleted. Returns them.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    prefix = f".{target.name}."
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.name.endswith((".tmp", ".old")):
            continue
        path = Path(entry.path)
        if time.time() - _newest_mtime(path) < min_age_s:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def sweep_stale_temps_in(dir_uri: str, min_age_s: float = STALE_TMP_AGE_S) -> list[Path]:
    """Remove every stale temporary entry (``.*.tmp``/``.*.old``) directly in a local folder.

    A stage calls this on its output folder at start; S3 needs nothing (a PUT is atomic).
    """
    if dir_uri.startswith("s3://") or not Path(dir_uri).is_dir():
        return []
    removed: list[Path] = []
    for entry in os.scandir(dir_uri):
        if entry.name.startswith(".") and entry.name.endswith((".tmp", ".old")):
            # the target name itself may contain dots: strip ".<random>.tmp" from the end
            target = Path(dir_uri) / entry.name[1:].rsplit(".", 2)[0]
            removed += [p for p in sweep_stale_temps(target, min_age_s) if p not in removed]
    return removed


def _newest_mtime(path: Path) -> float:
    try:
        newest = path.lstat().st_mtime
        if path.is_dir() and not path.is_symlink():
            for folder, _, files in os.walk(path):
                for name in files:
                    newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
                newest = max(newest, os.lstat(folder).st_mtime)
        return newest
    except OSError:
        return 0.0  # vanished meanwhile: nothing to keep
