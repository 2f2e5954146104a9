"""Checkpoints on object storage (``checkpoint.run_root = "s3://bucket/campaign/runs"``).

DCP writes to a local staging folder; then every rank uploads the files it wrote, and rank 0
uploads ``meta.json`` and finally the commit record (``_COMMITTED``, with every file's size and
checksum: :mod:`pretrain.checkpoint.integrity`) as the **last** object. A prefix without a commit
record is not a checkpoint, so a crash mid-upload leaves nothing that resume would pick.
Resume lists the committed prefixes, downloads the chosen one into the local staging folder
and verifies it against its record before loading. Pruning deletes the commit record first, so a
pruned checkpoint vanishes at once, then its files. A damaged checkpoint is set aside by moving
its record to ``_DAMAGED``. Torch-free; all IO through :mod:`pretrain.storage` (pyarrow S3,
endpoint and credentials from the standard AWS variables)::

    upload_files("staging/b00/.tmp-step-00000040", ["__0_0.distcp"], "s3://b/runs/b00/step-00000040")
    list_committed("s3://b/runs", "b00")    # ['s3://b/runs/b00/step-00000040', ...] oldest first
    local = download_checkpoint("s3://b/runs/b00/step-00000040", "staging/.downloads/b00/step-00000040")
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from pretrain import storage
from pretrain.checkpoint import integrity
from pretrain.errors import CheckpointError, DataError

DAMAGED = "_DAMAGED"
_STEP_RE = re.compile(r"^step-(\d{8})$")


def list_committed(run_root: str, branch: str) -> list[str]:
    """URIs of the committed ``step-*`` prefixes of ``branch``, oldest first."""
    fs, path = storage.filesystem(storage.join(run_root, branch))
    try:
        entries = fs.get_file_info(pafs.FileSelector(path, recursive=False))
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        name = entry.path.rstrip("/").rsplit("/", 1)[-1]
        if entry.type == pafs.FileType.Directory and (m := _STEP_RE.match(name)):
            uri = storage.join(run_root, branch, name)
            if storage.is_committed(uri):
                found.append((int(m.group(1)), uri))
    return [uri for _, uri in sorted(found)]


def upload_files(local_dir: str | Path, names: list[str], dest_uri: str) -> None:
    """Copy the named files of ``local_dir`` to ``dest_uri/<name>`` (streamed, no full read)."""
    fs, dest = storage.filesystem(dest_uri)
    for name in names:
        pafs.copy_files(str(Path(local_dir) / name), f"{dest}/{name}", destination_filesystem=fs)


def commit(dest_uri: str, record: dict[str, Any]) -> None:
    """Write the commit record, the last object of a checkpoint (one PUT: atomic)."""
    storage.write_json({"committed": True, **record}, storage.join(dest_uri, storage.COMMITTED))


def download_checkpoint(uri: str, local_dir: str | Path) -> Path:
    """Download the files a committed checkpoint's record lists into ``local_dir`` (replacing
    it), then its record last; returns the local folder. Verification is the caller's
    (:func:`pretrain.checkpoint.dcp.checkpoint_problems` on the local copy)."""
    record = storage.read_json(storage.join(uri, storage.COMMITTED))
    files = record.get("files")
    if not isinstance(files, dict):
        raise CheckpointError(f"{uri}: the commit record lists no files; cannot download it")
    if problems := integrity.record_problems(files):  # before a name can write outside local_dir
        raise CheckpointError(f"{uri}: not downloaded: " + "; ".join(problems))
    local = Path(local_dir)
    partial = local.with_name(f".partial-{local.name}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    fs, src = storage.filesystem(uri)
    for name in sorted(files):
        try:
            pafs.copy_files(f"{src}/{name}", str(partial / name), source_filesystem=fs)
        except (FileNotFoundError, OSError):
            if storage.exists(storage.join(uri, name)):
                raise
            continue  # missing on S3: the local copy lacks it too, and verification says so
    storage.write_json(record, str(partial / storage.COMMITTED))
    shutil.rmtree(local, ignore_errors=True)
    partial.rename(local)
    return local


def set_aside(uri: str, problems: list[str]) -> str:
    """Make a damaged checkpoint invisible to listing: its record moves to ``_DAMAGED``."""
    record = storage.read_json(storage.join(uri, storage.COMMITTED))
    storage.write_json({**record, "problems": problems}, storage.join(uri, DAMAGED))
    delete(storage.join(uri, storage.COMMITTED))
    return storage.join(uri, DAMAGED)


def delete(uri: str) -> None:
    fs, path = storage.filesystem(uri)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


def delete_checkpoint(uri: str) -> None:
    """Remove a checkpoint: the commit record first (it vanishes at once), then its files."""
    delete(storage.join(uri, storage.COMMITTED))
    fs, path = storage.filesystem(uri)
    try:
        fs.delete_dir(path)
    except (FileNotFoundError, DataError):
        pass
