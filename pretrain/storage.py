"""One storage helper: every artifact path is a URI (local path or ``s3://bucket/key``).

Writes are atomic: local files are written under a temporary name in the same folder and
renamed into place; an S3 PUT is atomic by protocol. A crash therefore never leaves a
half-written artifact visible. Directory-shaped artifacts (checkpoints, token shards) commit
with a ``_COMMITTED`` marker written last (see :func:`commit_marker`).

Usage::

    from pretrain import storage
    uri = storage.join("s3://bucket/campaign", "filtered_shards", "s0001", "documents.parquet")
    storage.write_table(table, uri)
    table = storage.read_table(uri)
    with storage.StreamingTableWriter(uri, schema) as writer:  # bounded row groups, atomic
        writer.write_rows(rows)
    for batch in storage.iter_table_batches(uri, batch_size=2048):  # one row group at a time
        ...

S3 endpoint and credentials come from the standard AWS variables (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``...), which the Dagster storage resource sets from its config.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pretrain.errors import ConfigError, DataError, refusals_named
from pretrain.tmpfiles import honour_umask, sweep_before_write

T = TypeVar("T")
R = TypeVar("R")

COMMITTED = "_COMMITTED"


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def join(base: str, *parts: str) -> str:
    """Join URI parts with ``/`` (works for local paths and ``s3://``)."""
    out = str(base).rstrip("/")
    for part in parts:
        out = f"{out}/{str(part).strip('/')}"
    return out


def basename(uri: str) -> str:
    """The last part of a URI: ``s3://b/runs/b00/step-00000040`` -> ``step-00000040``."""
    return str(uri).rstrip("/").rsplit("/", 1)[-1]


def parent(uri: str) -> str:
    """The folder holding ``uri``: ``s3://b/runs/b00`` -> ``s3://b/runs``; ``runs/b00`` ->
    ``runs``, ``runs`` -> ``.``. A bucket has no parent (ValueError). Never goes through
    ``Path``, which would turn ``s3://b`` into ``s3:/b``."""
    text = str(uri).rstrip("/")
    if is_s3(text):
        bucket_key = text[len("s3://") :]
        if "/" not in bucket_key:
            raise ValueError(f"{uri} is a bucket: it has no parent folder")
        return "s3://" + bucket_key.rsplit("/", 1)[0]
    return str(Path(text).parent)


def same_location(a: str, b: str) -> bool:
    """Whether two URIs name the same place: ``s3://`` URIs compared as text (a trailing ``/``
    ignored), local paths after resolving (relative paths, ``..``, symbolic links)."""
    a, b = str(a), str(b)
    if is_s3(a) or is_s3(b):
        return a.rstrip("/") == b.rstrip("/")
    return Path(a).resolve() == Path(b).resolve()


def _s3_filesystem() -> pafs.S3FileSystem:
    # delayed open: a write smaller than one part is a single PutObject at close, not a
    # multipart upload of three requests (an error still surfaces in the write's block)
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    kwargs: dict[str, Any] = {
        "region": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "allow_delayed_open": True,
    }
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs.update(endpoint_override=host or scheme, scheme=scheme if host else "https")
    return pafs.S3FileSystem(**kwargs)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """Return the pyarrow filesystem for ``uri`` and the path inside it."""
    if is_s3(uri):
        return _s3_filesystem(), uri[len("s3://") :]
    return pafs.LocalFileSystem(), str(Path(uri).absolute())


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def makedirs(uri: str) -> None:
    fs, path = filesystem(uri)
    with refusals_named(uri):
        fs.create_dir(path, recursive=True)


def has_key_after(prefix: str, after: str) -> bool:
    """Whether the ``s3://`` ``prefix`` holds an object whose URI sorts after ``after``: one
    LIST request (``StartAfter``), however many objects sort before it (a crawl of 90,000
    files whose new names sort last is looked at in one request, not 90)."""
    import boto3  # (with dagster-aws) a listing from a start key: pyarrow's selector has none

    bucket, _, key = prefix[len("s3://") :].partition("/")
    key = key.rstrip("/") + "/" if key.rstrip("/") else ""
    client = boto3.client(
        "s3",
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL"),
        region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    )
    start = after[len("s3://") + len(bucket) + 1 :]
    with refusals_named(prefix, "read"):
        found = client.list_objects_v2(Bucket=bucket, Prefix=key, StartAfter=start, MaxKeys=1)
    return int(found.get("KeyCount", 0)) > 0


def list_files(prefix: str, suffixes: tuple[str, ...] = ()) -> list[str]:
    """All files under ``prefix`` (recursive), sorted, optionally filtered by suffix.

    Locally, symlinked folders are followed but each real folder is walked once (a link
    loop such as ``ln -s . loop`` lists every file once), and a file reached by several
    paths is listed once, under the first path of a sorted top-down walk.
    """
    if not is_s3(prefix):
        return _list_local(Path(prefix), suffixes)
    fs, path = filesystem(prefix)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return []
    if info.type == pafs.FileType.File:
        found = [info]
    else:
        found = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    scheme = "s3://" if is_s3(prefix) else ""
    out = [
        f"{scheme}{f.path}"
        for f in found
        if f.type == pafs.FileType.File and (not suffixes or f.path.endswith(suffixes))
    ]
    return sorted(out)


def _list_local(root: Path, suffixes: tuple[str, ...]) -> list[str]:
    if root.is_file():
        return [str(root.absolute())] if not suffixes or str(root).endswith(suffixes) else []
    if not root.is_dir():
        return []
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: set[tuple[int, int]] = set()
    out: list[str] = []
    for folder, dirs, files in os.walk(root.absolute(), followlinks=True):
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen_dirs:
            dirs[:] = []
            continue
        seen_dirs.add((st.st_dev, st.st_ino))
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                fst = os.stat(path)
            except OSError:
                continue  # a dangling link names no file
            if (fst.st_dev, fst.st_ino) in seen_files or (suffixes and not name.endswith(suffixes)):
                continue
            seen_files.add((fst.st_dev, fst.st_ino))
            out.append(path)
    return sorted(out)


def read_bytes(uri: str) -> bytes:
    found = read_bytes_if_any(uri)
    if found is None:
        raise DataError(f"{uri} does not exist")
    return found


def read_bytes_if_any(uri: str) -> bytes | None:
    """The bytes of ``uri``, or None when there is no such file: on S3 a missing file is one
    request and a found one two (an ``exists`` before a read would add one to each)."""
    fs, path = filesystem(uri)
    try:
        # a random-access file knows its size and reads it in one request; an input stream
        # on S3 reads in small chunks, one request each (minutes for a 100 MB model file)
        with refusals_named(uri, "read"), fs.open_input_file(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


IO_THREADS = 16  # small files read at once: on S3 each read is a round trip


def map_io(fn: Callable[[T], R], items: Sequence[T], threads: int = IO_THREADS) -> list[R]:
    """``[fn(item) for item in items]``, ``threads`` at a time: for reading many small files
    (a first look at 10,000 shard groups reads 20,000 identities; on S3 they overlap). An
    exception of ``fn`` is raised as the loop would raise it."""
    if len(items) < 2 or threads < 2:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items))) as pool:
        return list(pool.map(fn, items))


def write_bytes(data: bytes, uri: str) -> None:
    """Write ``data`` to ``uri`` atomically (temp name + rename locally; one PUT on S3). A full
    disk, a read-only file system or a refused permission is a ``StorageError`` naming ``uri``
    and what to do."""
    with refusals_named(uri):
        if is_s3(uri):
            fs, path = filesystem(uri)
            with fs.open_output_stream(path, compression=None) as f:
                f.write(data)
            return
        _write_local(data, Path(uri))


def _write_local(data: bytes, target: Path) -> None:
    """The one local file write: a temporary name beside ``target``, synced, renamed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_before_write(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        honour_umask(tmp, fd=fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(uri: str) -> Any:
    """The JSON value in ``uri``; a file that is not JSON (cut short, edited by hand) is a
    ``DataError`` naming it."""
    return _json_of(read_bytes(uri), uri)


def read_json_if_any(uri: str) -> Any | None:
    """Like :func:`read_json`, None when there is no such file (no ``exists`` first)."""
    blob = read_bytes_if_any(uri)
    return None if blob is None else _json_of(blob, uri)


def _json_of(blob: bytes, uri: str) -> Any:
    try:
        return json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{uri} is not valid JSON ({exc}): restore it or remove it") from exc


def write_json(obj: Any, uri: str) -> None:
    write_bytes(_json_bytes(obj), uri)


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, sort_keys=True, default=str).encode()


def read_table(uri: str, columns: list[str] | None = None) -> pa.Table:
    fs, path = filesystem(uri)
    try:
        with refusals_named(uri, "read"):
            return pq.read_table(path, filesystem=fs, columns=columns)
    except FileNotFoundError as exc:
        raise DataError(f"{uri} does not exist") from exc


ROW_GROUP_ROWS = 4096


def write_table(table: pa.Table, uri: str, row_group_size: int = ROW_GROUP_ROWS) -> None:
    """Write a Parquet table atomically (zstd compressed, deterministic bytes).

    Row groups are bounded (``row_group_size`` rows), so a reader that streams with
    ``iter_table_batches`` holds one group at a time, not the whole file.
    """
    buf = io.BytesIO()
    pq.write_table(
        table, buf, compression="zstd", write_statistics=True, row_group_size=row_group_size
    )
    write_bytes(buf.getvalue(), uri)


def iter_table_batches(uri: str, batch_size: int = 4096) -> Iterator[pa.RecordBatch]:
    """Record batches of ``batch_size`` rows (the last may be shorter), one row group at a time.

    Memory is bounded by one batch plus one row group, not by the file (see
    ``bench/RESULTS.md``, "Filter peak memory vs shard size"): one ``iter_batches`` call over
    the whole file keeps memory from the row groups it has passed (Arrow allocations 3 → 19
    MiB over 1 → 40 row groups of 256 documents), one call per row group stays flat. Columns
    are decoded on the calling thread: buffers that Arrow's worker threads allocate and this
    thread frees stay in mimalloc's per-thread heaps (filter peaks of 144-175 MiB, varying run
    to run, against ~127 MiB). Batches span row-group boundaries, so ``batch_size`` does not
    depend on how the file was written.
    """
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        pending: list[pa.RecordBatch] = []  # fewer than batch_size rows in all
        rows = 0
        for group in range(parquet.num_row_groups):
            for piece in parquet.iter_batches(
                batch_size=batch_size, row_groups=[group], use_threads=False
            ):
                if rows + piece.num_rows < batch_size:
                    pending.append(piece)
                    rows += piece.num_rows
                    continue
                take = batch_size - rows
                full = [*pending, piece.slice(0, take)]
                rest = piece.slice(take)
                pending, rows = ([rest] if rest.num_rows else []), rest.num_rows
                del piece, rest  # no reference to the batch survives while the caller has it
                yield _take_batch(full)
        if pending:
            yield _take_batch(pending)


def _take_batch(parts: list[pa.RecordBatch]) -> pa.RecordBatch:
    """One batch from ``parts``, emptying the list (so its owner keeps no reference)."""
    out = parts.pop() if len(parts) == 1 else pa.concat_batches(parts)
    parts.clear()
    return out


# Text per row group of a StreamingTableWriter. 1 MiB (Parquet's default page size), not 4:
# measured lower and flatter peaks in both stages (bench/RESULTS.md), files 1-2 % larger.
ROW_GROUP_BYTES = 1 * 2**20


class StreamingTableWriter:
    """Append rows to a Parquet file in bounded row groups; commit atomically on a clean exit.

    Rows are buffered until ``row_group_rows`` rows or about ``row_group_bytes`` of string
    values (characters of ``str``, length of ``bytes``) are pending, then written as one row
    group (zstd), so memory is bounded by one row group whatever the file size, and a reader
    using :func:`iter_table_batches` holds one group at a time. The file is written under a
    temporary name beside the target and renamed into place (local), or uploaded in one PUT
    (``s3://``), only when the ``with`` block exits cleanly; on an exception the temporary
    file is deleted and nothing becomes visible::

        with storage.StreamingTableWriter(uri, DOCUMENT_SCHEMA) as writer:
            for rows in batches:
                writer.write_rows(rows)  # dicts; missing columns are null
        writer.rows  # rows written
    """

    def __init__(
        self,
        uri: str,
        schema: pa.Schema,
        *,
        row_group_rows: int = ROW_GROUP_ROWS,
        row_group_bytes: int = ROW_GROUP_BYTES,
    ) -> None:
        if row_group_rows < 1 or row_group_bytes < 1:
            raise ConfigError(
                f"row_group_rows={row_group_rows}, row_group_bytes={row_group_bytes}: "
                "use positive numbers"
            )
        self.uri, self.schema, self.rows = uri, schema, 0
        self.row_group_rows, self.row_group_bytes = row_group_rows, row_group_bytes
        self._pending: list[dict[str, Any]] = []
        self._pending_bytes = 0
        with refusals_named(uri):
            self._open_temporary(uri, schema)

    def _open_temporary(self, uri: str, schema: pa.Schema) -> None:
        if is_s3(uri):
            self._dir: Path | None = None
            fd, self._tmp = tempfile.mkstemp(suffix=".parquet")
        else:
            self._dir = Path(uri).parent
            self._dir.mkdir(parents=True, exist_ok=True)
            sweep_before_write(Path(uri))
            fd, self._tmp = tempfile.mkstemp(
                prefix=f".{Path(uri).name}.", suffix=".tmp", dir=self._dir
            )
            honour_umask(self._tmp, fd=fd)
        os.close(fd)
        try:
            self._writer = pq.ParquetWriter(self._tmp, schema, compression="zstd")
        except BaseException:
            Path(self._tmp).unlink(missing_ok=True)
            raise

    def write_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        """Add rows (dicts keyed by column name); full row groups are written out."""
        for row in rows:
            self._pending.append(row)
            self._pending_bytes += sum(len(v) for v in row.values() if isinstance(v, str | bytes))
            self.rows += 1
            if (
                len(self._pending) >= self.row_group_rows
                or self._pending_bytes >= self.row_group_bytes
            ):
                self.flush()

    def flush(self) -> None:
        """Write the pending rows as one row group (nothing when none are pending)."""
        if not self._pending:
            return
        names = self.schema.names
        table = pa.Table.from_pylist(
            [{name: row.get(name) for name in names} for row in self._pending],
            schema=self.schema,
        )
        self._pending, self._pending_bytes = [], 0
        with refusals_named(self.uri):
            self._writer.write_table(table, row_group_size=table.num_rows)
        del table
        # mimalloc (pyarrow's default pool) keeps freed pages; without this the peak RSS of
        # a long stream creeps up by several MiB (bench/filter_memory.py)
        pa.default_memory_pool().release_unused()

    def __enter__(self) -> StreamingTableWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            with refusals_named(self.uri):
                try:
                    if exc_type is None:
                        self.flush()
                finally:
                    self._writer.close()
                if exc_type is not None:
                    return
                if self._dir is None:  # one streamed upload (an S3 PUT is atomic by protocol)
                    fs, path = filesystem(self.uri)
                    pafs.copy_files(self._tmp, path, destination_filesystem=fs)
                else:
                    os.replace(self._tmp, self.uri)
        finally:
            self._pending = []
            Path(self._tmp).unlink(missing_ok=True)


def local_path(uri: str) -> Path:
    """The local path for ``uri``; raises for S3 (callers that need a local dir stage first)."""
    if is_s3(uri):
        raise DataError(f"{uri} is remote; this step needs a local path (stage it first)")
    return Path(uri)


def commit_marker(dir_uri: str, info: dict[str, Any] | None = None) -> None:
    """Mark a directory artifact complete. Readers treat a dir without the marker as absent."""
    write_json(_marker(info), join(dir_uri, COMMITTED))


def _marker(info: dict[str, Any] | None) -> dict[str, Any]:
    return {"committed": True, **(info or {})}


def is_committed(dir_uri: str) -> bool:
    return exists(join(dir_uri, COMMITTED))


def replace_dir(files: dict[str, bytes], dir_uri: str, info: dict[str, Any] | None = None) -> None:
    """Make ``dir_uri`` hold exactly ``files`` plus the commit marker, replacing what was there.

    Readers never see old and new files mixed. Locally the new folder is written beside the
    old one and swapped in with two renames (the folder is briefly absent, never partial). On
    S3 the old marker is deleted first, so the prefix reads as absent until the new marker is
    written last; files of the old version that the new one lacks are deleted.
    """
    with refusals_named(dir_uri):
        _replace_dir(files, dir_uri, info)


def _replace_dir(files: dict[str, bytes], dir_uri: str, info: dict[str, Any] | None) -> None:
    if is_s3(dir_uri):
        fs, path = filesystem(dir_uri)
        if exists(join(dir_uri, COMMITTED)):
            fs.delete_file(f"{path}/{COMMITTED}")
        for uri in list_files(dir_uri):
            if uri.rsplit("/", 1)[-1] not in files:
                fs.delete_file(filesystem(uri)[1])
        for name, blob in sorted(files.items()):
            write_bytes(blob, join(dir_uri, name))
        commit_marker(dir_uri, info)
        return
    target = Path(dir_uri)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_before_write(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    honour_umask(staging, directory=True)
    old = staging.with_name(staging.name[: -len(".tmp")] + ".old")
    try:
        for name, blob in sorted(files.items()):
            _write_local(blob, staging / name)
        _write_local(_json_bytes(_marker(info)), staging / COMMITTED)
        if target.exists():
            os.replace(target, old)
        os.replace(staging, target)
    except BaseException:
        _remove_tree(staging)
        if old.exists() and not target.exists():
            os.replace(old, target)  # put the previous version back
        raise
    _remove_tree(old)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove(uri: str) -> None:
    """Delete one file if it exists."""
    if exists(uri):
        fs, path = filesystem(uri)
        fs.delete_file(path)


def remove_dir(uri: str) -> None:
    """Delete a folder and everything under it, if it exists (on S3: every object under the
    prefix). A failure raises: a caller that needs a clean start must not go on without one."""
    with refusals_named(uri):
        if not is_s3(uri):
            if Path(uri).exists():
                shutil.rmtree(uri)
            return
        for file_uri in list_files(uri):
            remove(file_uri)


def move_dir(src_uri: str, dst_uri: str) -> None:
    """Move everything under ``src_uri`` to ``dst_uri`` (one rename locally; on S3 a copy and a
    delete per object, the destination complete before any source object is deleted)."""
    if not is_s3(src_uri) and not is_s3(dst_uri):
        target = Path(dst_uri)
        with refusals_named(dst_uri):
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                _remove_tree(target)
            os.replace(src_uri, target)
        return
    files = list_files(src_uri)
    for uri in files:
        write_bytes(read_bytes(uri), join(dst_uri, uri[len(src_uri.rstrip("/")) + 1 :]))
    for uri in files:
        remove(uri)
