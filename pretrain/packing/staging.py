"""Packed tokens from ``s3://`` on a node without a shared filesystem: a local, verified copy.

The trainer memory-maps token shards, which needs local files. ``stage_packed_dir`` returns a
local directory for any packed-tokens URI: a local path unchanged; an ``s3://`` prefix is
downloaded once per node into a cache folder named by the URI and the index's content hash
(``$PRETRAIN_CACHE_DIR``, default ``<tmp>/pretrain-cache``). The copy is assembled under a
temporary name and renamed into place with its ``_COMMITTED`` marker last, so a crash mid-download
never leaves a copy that looks complete, and several ranks of one node staging at once end with
one copy (the first rename wins; the others discard theirs).

    local = stage_packed_dir("s3://campaign/artifacts/packed_tokens")
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from pretrain import storage
from pretrain.errors import DataError


def cache_root() -> Path:
    return Path(
        os.environ.get("PRETRAIN_CACHE_DIR") or Path(tempfile.gettempdir()) / "pretrain-cache"
    )


def stage_packed_dir(packed_uri: str) -> str:
    """A local directory holding the committed packed tokens at ``packed_uri``."""
    if not storage.is_s3(packed_uri):
        return packed_uri
    prefix = packed_uri.rstrip("/")
    if not storage.is_committed(prefix):
        raise DataError(
            f"{prefix} has no {storage.COMMITTED} marker: packing did not finish; rerun packed_tokens"
        )
    index = storage.read_bytes(f"{prefix}/index.json")
    name = hashlib.sha256(prefix.encode() + b"\0" + index).hexdigest()[:20]
    final = cache_root() / name
    if (final / storage.COMMITTED).exists():
        return str(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=final.parent))
    try:
        for uri in storage.list_files(prefix):
            relative = uri[len(prefix) + 1 :]
            if relative == storage.COMMITTED:
                continue
            target = partial / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(storage.read_bytes(uri))
        if (partial / "index.json").read_bytes() != index:
            raise DataError(f"{prefix}/index.json changed while it was being copied; retry")
        (partial / storage.COMMITTED).write_bytes(
            storage.read_bytes(f"{prefix}/{storage.COMMITTED}")
        )
        try:
            os.rename(partial, final)
        except OSError:  # another rank of this node finished first
            if not (final / storage.COMMITTED).exists():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return str(final)
