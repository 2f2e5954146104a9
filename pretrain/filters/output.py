"""Streaming, atomic Parquet output: one row group per batch, bounded memory.

The filter stage never holds a whole shard: each batch of kept documents and rejects is
appended to a Parquet file under a temporary name, which is renamed into place (local) or
uploaded in one PUT (``s3://``) only when the stage succeeds, so a crash never leaves a
half-written artifact visible::

    from pretrain.filters.output import StreamingTableWriter
    with StreamingTableWriter(uri, DOCUMENT_SCHEMA) as writer:
        for rows in batches:
            writer.write_rows(rows)          # a list of dicts
    writer.rows  # rows written

On an exception inside the ``with`` block the temporary file is deleted.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import TracebackType

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pretrain import storage


class StreamingTableWriter:
    """Append row groups to ``uri``; commit atomically on a clean exit."""

    def __init__(self, uri: str, schema: pa.Schema) -> None:
        self.uri, self.schema, self.rows = uri, schema, 0
        if storage.is_s3(uri):
            self._dir = None
            fd, self._tmp = tempfile.mkstemp(suffix=".parquet")
        else:
            self._dir = Path(uri).parent
            self._dir.mkdir(parents=True, exist_ok=True)
            fd, self._tmp = tempfile.mkstemp(
                prefix=f".{Path(uri).name}.", suffix=".tmp", dir=self._dir
            )
        os.close(fd)
        self._writer = pq.ParquetWriter(self._tmp, schema, compression="zstd")

    def write_rows(self, rows: list[dict]) -> None:
        if not rows:
            return
        table = pa.Table.from_pylist(
            [{name: row.get(name) for name in self.schema.names} for row in rows],
            schema=self.schema,
        )
        self._writer.write_table(table)
        self.rows += len(rows)

    def __enter__(self) -> StreamingTableWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._writer.close()
        try:
            if exc_type is not None:
                return
            if self._dir is None:  # one streamed upload (an S3 PUT is atomic by protocol)
                fs, path = storage.filesystem(self.uri)
                pafs.copy_files(self._tmp, path, destination_filesystem=fs)
            else:
                os.replace(self._tmp, self.uri)
        finally:
            Path(self._tmp).unlink(missing_ok=True)
