"""Input identity: an output records which version of each input it was computed from, and a
later stage refuses an output whose input has changed since (issue 19, item 11).

A file's identity is cheap and content-derived: its size plus the sha256 of its last
64 KiB. For Parquet that tail is the footer (row-group offsets and column statistics), which
changes whenever the rows do; for other files a rewrite of the tail or a new size changes
it. Nothing else is read, so checking a few thousand shards costs one small read each::

    from pretrain.lineage import check_inputs, file_identity
    recorded = {documents_uri: file_identity(documents_uri)}       # stored with the output
    check_inputs(recorded, output="minhash_signatures[web-0003]")  # later: DataError if stale
"""

from __future__ import annotations

import hashlib

from pretrain import storage
from pretrain.errors import DataError

TAIL_BYTES = 64 * 1024


def file_identity(uri: str) -> str:
    """``<size>:<sha256 of the last 64 KiB>`` of ``uri`` (local or ``s3://``)."""
    fs, path = storage.filesystem(uri)
    try:
        with fs.open_input_file(path) as f:
            size = f.size()
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
    except FileNotFoundError as exc:
        raise DataError(f"{uri} does not exist: materialize it first") from exc
    return f"{size}:{hashlib.sha256(tail).hexdigest()}"


def stale_inputs(recorded: dict[str, str]) -> list[str]:
    """The input URIs whose identity now differs from ``recorded`` (or that are gone)."""
    stale = []
    for uri, identity in sorted(recorded.items()):
        try:
            current = file_identity(uri)
        except DataError:
            current = "absent"
        if current != identity:
            stale.append(uri)
    return stale


def check_inputs(recorded: dict[str, str], *, output: str, rebuild: str = "") -> None:
    """Raise DataError naming ``output`` and every input that changed after it was built."""
    stale = stale_inputs(recorded)
    if stale:
        raise DataError(
            f"{output} is stale: it was computed from an earlier version of "
            f"{', '.join(stale)}; {rebuild or 're-materialize it from the current inputs'}"
        )
