"""File sizes and checksums of a checkpoint, recorded in its commit record and verified before loading.

A checkpoint's ``_COMMITTED`` record lists every file it holds (DCP shards, ``.metadata``, the
per-rank RNG states, ``meta.json``) with its size and an ``xxh3_64`` checksum::

    {"committed": true, "step": 40, "key": "b00-s000000040", "checksum": "xxh3_64",
     "files": {".metadata": {"size": 1234, "xxh3_64": "9f0c..."}, "__0_0.distcp": {...}, ...}}

Each rank hashes the files it wrote itself (:func:`rank_files`), right after the write and
before the commit, so the cost is spread over the ranks; rank 0 merges the lists into the
record. :func:`verify_files` re-reads a checkpoint before it is loaded: a missing, truncated or
bit-flipped file is found before torch sees it (sizes first, then checksums). xxh3 hashes at
several GB/s, so verification costs a few percent of a save (``bench/checkpoint_verify.py``).
The checksum guards against damage (disks, truncated copies, half-finished uploads); it is not
a signature: whoever may write the checkpoint folder may also rewrite its record (README,
"Trust model").

    files = digest_files("runs/b00/.tmp-step-00000040", ["meta.json", "rng-rank00000.pt"])
    problems = verify_files("runs/b00/step-00000040", files)   # [] when intact
    verify_files("s3://b/runs/b00/step-00000040", files, checksums=False)   # sizes only
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import xxhash

from pretrain import storage
from pretrain.identity import IDENTITY_FILE

CHECKSUM = "xxh3_64"
CHUNK_BYTES = 8 * 2**20
# written by DCP: `.metadata` by the coordinator (rank 0), `__<rank>_<n>.distcp` by each rank
_SHARD_RE = re.compile(r"^__(\d+)_\d+\.distcp$")
_RNG_RE = re.compile(r"^rng-rank(\d{5})\.pt$")
DCP_METADATA = ".metadata"
# every name a commit record may list: a name with a '/' or '..' would reach outside the folder
# (a download writes each listed file, so a tampered record could write anywhere)
_RECORDED_RE = re.compile(
    rf"^(\.metadata|meta\.json|{re.escape(IDENTITY_FILE)}|__\d+_\d+\.distcp|rng-rank\d{{5}}\.pt)$"
)

FileRecord = dict[str, Any]  # {"size": int, "xxh3_64": hex str}


def digest_file(path: str | Path) -> FileRecord:
    """Size and xxh3_64 of one file, read in 8 MiB chunks into one reused buffer (memory stays
    flat; reading, not hashing, is the cost: xxh3 runs at tens of GB/s)."""
    hasher = xxhash.xxh3_64()
    size = 0
    buffer = memoryview(bytearray(CHUNK_BYTES))
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            hasher.update(buffer[:n])
            size += n
    return {"size": size, CHECKSUM: hasher.hexdigest()}


def digest_files(folder: str | Path, names: Iterable[str]) -> dict[str, FileRecord]:
    """``{name: {"size", "xxh3_64"}}`` for the named files of ``folder``."""
    return {name: digest_file(Path(folder) / name) for name in sorted(names)}


def rank_files(folder: str | Path, rank: int) -> list[str]:
    """The files of a checkpoint folder that ``rank`` wrote: its DCP shards and RNG state, plus
    ``.metadata`` for rank 0 (DCP's coordinator)."""
    names = []
    for path in Path(folder).iterdir():
        shard, rng = _SHARD_RE.match(path.name), _RNG_RE.match(path.name)
        if (shard and int(shard.group(1)) == rank) or (rng and int(rng.group(1)) == rank):
            names.append(path.name)
    if rank == 0 and (Path(folder) / DCP_METADATA).exists():
        names.append(DCP_METADATA)
    return sorted(names)


def record_problems(files: Mapping[str, Any]) -> list[str]:
    """What is malformed in a commit record's ``files``: names a checkpoint never writes (a
    path into another folder among them) and entries without an integer size and a checksum."""
    problems = []
    for name, record in sorted(files.items()):
        if not isinstance(name, str) or not _RECORDED_RE.match(name):
            problems.append(
                f"the commit record lists {name!r}, not a checkpoint file (.metadata, meta.json, "
                f"{IDENTITY_FILE}, __<rank>_<n>.distcp, rng-rank<rank>.pt): tampered with or not "
                "written by pretrain"
            )
        elif not (
            isinstance(record, dict)
            and isinstance(record.get("size"), int)
            and isinstance(record.get(CHECKSUM), str)
        ):
            problems.append(
                f"{name}: the commit record's entry {record!r} has no size and checksum"
            )
    return problems


def _digest_uri(uri: str) -> FileRecord:
    """:func:`digest_file` of an ``s3://`` object, read in 8 MiB ranges."""
    hasher = xxhash.xxh3_64()
    size = 0
    fs, path = storage.filesystem(uri)
    with fs.open_input_file(path) as f:
        while chunk := f.read(CHUNK_BYTES):
            hasher.update(chunk)
            size += len(chunk)
    return {"size": size, CHECKSUM: hasher.hexdigest()}


def _sizes(folder: str, names: list[str]) -> dict[str, int | None]:
    """Size of each named file of ``folder`` (local or ``s3://``); None where it is missing."""
    fs, root = storage.filesystem(folder)
    infos = fs.get_file_info([f"{root}/{name}" for name in names])
    return {
        name: info.size if info.type == pafs.FileType.File else None
        for name, info in zip(names, infos, strict=True)
    }


def verify_files(
    folder: str | Path, files: Mapping[str, FileRecord], *, checksums: bool = True
) -> list[str]:
    """Problems found in ``folder`` (local or ``s3://``) against the recorded ``files``; an
    empty list means intact.

    Every size is checked before any checksum, so a truncated or missing file is reported
    without reading the rest; ``checksums=False`` stops there (no file is read). A record
    without ``.metadata`` is itself a problem: DCP cannot load without it."""
    problems = record_problems(files)
    if problems:
        return problems
    if DCP_METADATA not in files:
        problems.append(f"the commit record lists no {DCP_METADATA} (not a DCP checkpoint)")
    sizes = _sizes(str(folder), sorted(files))
    for name, record in sorted(files.items()):
        if (size := sizes[name]) is None:
            problems.append(f"{name}: missing")
        elif size != record["size"]:
            problems.append(f"{name}: {size} bytes, the commit record says {record['size']}")
    if problems or not checksums:
        return problems
    remote = storage.is_s3(str(folder))
    for name, record in sorted(files.items()):
        if remote:
            actual = _digest_uri(storage.join(str(folder), name))[CHECKSUM]
        else:
            actual = digest_file(Path(folder) / name)[CHECKSUM]
        if actual != record[CHECKSUM]:
            problems.append(
                f"{name}: {CHECKSUM} {actual}, the commit record says {record[CHECKSUM]} "
                "(the file's bytes changed after the save)"
            )
    return problems
