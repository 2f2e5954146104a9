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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import xxhash

CHECKSUM = "xxh3_64"
CHUNK_BYTES = 8 * 2**20
# written by DCP: `.metadata` by the coordinator (rank 0), `__<rank>_<n>.distcp` by each rank
_SHARD_RE = re.compile(r"^__(\d+)_\d+\.distcp$")
_RNG_RE = re.compile(r"^rng-rank(\d{5})\.pt$")
DCP_METADATA = ".metadata"

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


def verify_files(folder: str | Path, files: Mapping[str, FileRecord]) -> list[str]:
    """Problems found in ``folder`` against the recorded ``files``; an empty list means intact.

    Every size is checked before any checksum, so a truncated or missing file is reported
    without reading the rest. A record without ``.metadata`` is itself a problem: DCP cannot
    load without it."""
    problems = []
    if DCP_METADATA not in files:
        problems.append(f"the commit record lists no {DCP_METADATA} (not a DCP checkpoint)")
    root = Path(folder)
    for name, record in sorted(files.items()):
        path = root / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif (size := path.stat().st_size) != record["size"]:
            problems.append(f"{name}: {size} bytes, the commit record says {record['size']}")
    if problems:
        return problems
    for name, record in sorted(files.items()):
        actual = digest_file(root / name)[CHECKSUM]
        if actual != record[CHECKSUM]:
            problems.append(
                f"{name}: {CHECKSUM} {actual}, the commit record says {record[CHECKSUM]} "
                "(the file's bytes changed after the save)"
            )
    return problems
