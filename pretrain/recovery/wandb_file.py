"""Reader of W&B offline run files (``run-<id>.wandb``), safe while the writer still appends.

wandb 0.31 has no Python reader for its own transaction log, so this is one. The format is a
leveldb-style log::

    file   = header (7 bytes: b":W&B", magic 0xBEE1 little-endian, version 0) + 32 KiB blocks
    block  = chunks; a block tail shorter than a chunk header (7 bytes) is zero padding
    chunk  = crc32 (u32 LE) | length (u16 LE) | type (u8: FULL=1 FIRST=2 MIDDLE=3 LAST=4) | data
    crc    = zlib.crc32(data, zlib.crc32(bytes([type])))
    record = one FULL chunk, or FIRST + MIDDLE* + LAST; the payload is a protobuf
             ``wandb.proto.wandb_internal_pb2.Record``

History rows are ``record.history.item`` entries (``key`` or ``nested_key``, ``value_json``);
``_step`` is the step given to ``run.log(..., step=...)``.

    rows, cursor = read_history("runs/wandb/offline-run-.../run-b00-1a2b3c4d.wandb", cursor=0)
    # later, while training continues:
    more, cursor = read_history(path, cursor)

The cursor is the byte offset just past the last *complete* record read. Reading stops at the
first incomplete record (a writer mid-append), so the next call picks it up whole. A complete
chunk whose CRC does not match, or a malformed chunk sequence, raises :class:`DataError` naming
the byte offset — corruption is never skipped silently.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

from pretrain import storage
from pretrain.errors import DataError

FILE_HEADER = b":W&B" + struct.pack("<H", 0xBEE1) + b"\x00"
BLOCK_SIZE = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_history(path: str | Path, cursor: int = 0) -> tuple[list[dict[str, Any]], int]:
    """History rows appended after byte offset ``cursor`` and the new cursor.

    Each row is a dict of the logged values (NaN and ±inf included) plus ``_step``. ``cursor=0``
    reads from the start. Other record types (summary, telemetry, ...) are passed over.
    """
    rows = []
    records, new_cursor = read_records(path, cursor)
    if not records:
        return [], new_cursor
    from wandb.proto import wandb_internal_pb2  # lazy: protobuf + wandb are heavy for the daemon

    for offset, payload in records:
        # protobuf-generated: Record is built into the module's globals at import, no stubs
        record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
        try:
            record.ParseFromString(payload)
        except Exception as exc:  # protobuf raises DecodeError, which is not exported stably
            raise DataError(f"{path}: record at byte {offset} is not a W&B Record: {exc}") from exc
        if record.WhichOneof("record_type") == "history":
            rows.append(_history_row(record.history, path, offset))
    return rows, new_cursor


def read_records(path: str | Path, cursor: int = 0) -> tuple[list[tuple[int, bytes]], int]:
    """Complete record payloads after ``cursor`` as ``(offset, payload)``, and the new cursor."""
    # offline files are small next to the run; one read, no races (local path or s3:// URI:
    # with an s3:// run root the trainer mirrors its file there, pretrain.train.mirror)
    data = storage.read_bytes(str(path))
    if len(data) < len(FILE_HEADER):
        return [], cursor  # the writer has not even written the header yet
    if data[:4] != FILE_HEADER[:4] or data[4:6] != FILE_HEADER[4:6]:
        raise DataError(f"{path} is not a W&B run file (header {data[:7]!r}, want {FILE_HEADER!r})")
    position = max(cursor, len(FILE_HEADER))
    records: list[tuple[int, bytes]] = []
    while True:
        found = _next_record(data, position, path)
        if found is None:
            return records, position
        record_offset, payload, position = found
        records.append((record_offset, payload))


def _next_record(data: bytes, position: int, path: str | Path) -> tuple[int, bytes, int] | None:
    """One whole record starting at (or after block padding from) ``position``, or None."""
    parts: list[bytes] = []
    record_offset: int | None = None
    while True:
        left_in_block = BLOCK_SIZE - position % BLOCK_SIZE
        if left_in_block < CHUNK_HEADER:
            position += left_in_block  # zero padding at the block tail
        if position + CHUNK_HEADER > len(data):
            return None
        crc, length, kind = struct.unpack_from("<IHB", data, position)
        end = position + CHUNK_HEADER + length
        if end > len(data):
            return None  # the writer is still appending this chunk
        if kind == 0 and length == 0 and crc == 0:
            return None  # preallocated zeros: nothing written here yet
        chunk = data[position + CHUNK_HEADER : end]
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise DataError(
                f"{path}: CRC mismatch in the chunk at byte {position} (type {kind}, "
                f"{length} bytes); the file is corrupt from there on"
            )
        starts = kind in (FULL, FIRST)
        if starts != (record_offset is None) or kind not in (FULL, FIRST, MIDDLE, LAST):
            raise DataError(
                f"{path}: unexpected chunk type {kind} at byte {position} "
                f"({'inside' if record_offset is not None else 'outside'} a multi-chunk record)"
            )
        if record_offset is None:
            record_offset = position
        parts.append(chunk)
        position = end
        if kind in (FULL, LAST):
            return record_offset, b"".join(parts), position


def _history_row(history: Any, path: str | Path, offset: int) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for item in history.item:
        key = item.key or ".".join(item.nested_key)
        try:
            row[key] = json.loads(item.value_json)  # Python's json reads NaN and Infinity
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: history value {key!r} at byte {offset} is not JSON") from exc
    if "_step" not in row and history.HasField("step"):
        row["_step"] = history.step.num
    return row
