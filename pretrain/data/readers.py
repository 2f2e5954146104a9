"""Read raw records from JSONL (plain/.gz/.zst), Parquet, WARC/WET, text and package METADATA.

Every input is a :class:`RawFile` (a URI, local or ``s3://``, plus the mixture source it
feeds and its kind). :func:`iter_records` streams one dict per record; bad input is never
skipped silently, it comes out as a *reject record* carrying a stable ``reason``::

    from pretrain.data.readers import RawFile, iter_records, is_reject
    raw = RawFile(uri="crawl/CC-MAIN-0000.warc.gz", source="web", kind="warc")
    for record in iter_records(raw):
        if isreject(record):
            print(record["reason"], record["detail"])  # e.g. non_html, undecodable
        else:
            print(record["url"], len(record["text"]))

Good records: ``{"text", "source", "url", "source_id", "metadata"}``: ``source_id`` is the
input's own id (JSONL/Parquet ``id``, WARC-Record-ID; ``None`` for plain text), ``metadata``
every other input field as a JSON object string (``None`` when there is none); the record's
own ``source`` field, if any, is kept there, since ``source`` names the mixture source.
Rejects carry the same provenance where the input could be parsed. Reject records add
``"reason"`` and
``"detail"`` (``text`` may be ``None``). Reasons: ``malformed_json``, ``missing_text`` (null
or absent), ``text_not_string`` (an int, list, object or binary ``text``), ``undecodable``,
``invalid_unicode`` (a lone surrogate such as a ``\ud800`` JSON escape, which no UTF-8
writer accepts), ``binary_content``, ``line_too_long`` / ``record_too_long`` (over
:data:`pretrain.data.streams.MAX_LINE_BYTES`: a gzip bomb costs one capped buffer),
``corrupt_member`` (a damaged gzip member: the reader resumes at the next intact member and
the detail says how many members and compressed bytes were lost), ``read_error``
(truncated/corrupt stream: the detail names the file and how many records came before),
``warc_broken_header`` (the reader resynchronizes on the next ``WARC/`` line and says at
which byte offset), ``empty_file``, ``missing_text_column``, ``unsupported_format`` (a file
no reader handles, listed so that it is counted, never skipped silently), ``non_html``,
``non_http``. A UTF-8 byte-order mark at the start of a file is dropped.

Bytes are decoded with :func:`pretrain.data.encoding.decode_bytes` (declared charset, then
UTF-8, then detection); HTML becomes main text with resiliparse (see ``bench/RESULTS.md`` for
the measured choice), falling back to a plain tag stripper when it finds no main content.
"""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Callable, Iterator
from email.parser import BytesHeaderParser
from typing import Any

from pretrain import storage
from pretrain.data.encoding import decode_bytes
from pretrain.data.extract import ExtractConfig
from pretrain.data.records import KINDS, RawFile, is_reject, lost, reject, writable  # noqa: F401 (re-exported)
from pretrain.data.streams import MAX_LINE_BYTES, LineTooLong, Resynced, open_stream
from pretrain.data.warc import iter_warc
from pretrain.errors import DataError

_COMPRESSIONS = (".gz", ".zst", ".bz2", ".xz")  # detected from magic bytes when read
_BASE_SUFFIXES = {
    ".jsonl": "jsonl",
    ".json": "jsonl",  # JSON lines under a .json name (a JSON array gives malformed_json)
    ".ndjson": "jsonl",
    ".warc": "warc",
    ".wet": "warc",
    ".txt": "text",
    ".md": "text",
    ".rst": "text",
    ".py": "text",
}


def kind_for(uri: str) -> str | None:
    """Guess the reader kind from a file name; ``None`` for names no reader handles.

    ``.jsonl``/``.json``/``.ndjson``, ``.warc``/``.wet`` and text names may carry one
    compression suffix (``.gz``, ``.zst``, ``.bz2``, ``.xz``); Parquet compresses inside.
    """
    name = uri.rsplit("/", 1)[-1].lower()
    if name.endswith(".parquet"):
        return "parquet"
    for compression in _COMPRESSIONS:
        if name.endswith(compression):
            name = name[: -len(compression)]
            break
    return _BASE_SUFFIXES.get("." + name.rsplit(".", 1)[-1]) if "." in name else None


def _unicode_problem(record: dict[str, Any]) -> str | None:
    """Why a good record's text or url cannot be stored as UTF-8 (lone surrogates), if so."""
    for name in ("text", "url"):
        try:
            record[name].encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = record[name][exc.start]
            return f"'{name}' holds a lone surrogate U+{ord(bad):04X} at character {exc.start}"
    return None


def iter_records(raw: RawFile, extract: ExtractConfig | None = None) -> Iterator[dict[str, Any]]:
    """Yield good records and reject records from ``raw`` in file order (HTML in WARC
    responses goes through ``extract``, default ``ExtractConfig()``)."""
    readers: dict[str, Callable[[RawFile], Iterator[dict[str, Any]]]] = {
        "jsonl": _iter_jsonl,
        "parquet": _iter_parquet,
        "warc": functools.partial(_iter_warc, extract=extract),
        "text": _iter_text,
        "metadata": _iter_metadata,
        "unsupported": _iter_unsupported,
    }
    reader = readers[raw.kind]
    if not storage.exists(raw.uri):
        # A manifest naming a missing file is a broken plan, not bad input: stop loudly.
        raise DataError(f"{raw.uri} does not exist: re-plan the shard manifests")
    count = 0
    try:
        for record in reader(raw):
            count += 1
            yield record
    except (OSError, EOFError, zlib.error, ValueError, _zstd_error()) as exc:
        # Truncated/corrupt compressed streams surface here after earlier records were yielded;
        # what followed the damage cannot be counted (it was never decoded).
        detail = (
            f"after {count} records of {raw.uri}: {type(exc).__name__}: {exc}; "
            "the records after this point are lost (the stream cannot be decoded further)"
        )
        yield reject(raw, raw.uri, "read_error", detail[:500])
        return
    if count == 0:
        yield reject(raw, raw.uri, "empty_file", "no records")


def _zstd_error() -> type[Exception]:
    import zstandard

    return zstandard.ZstdError


def _iter_unsupported(raw: RawFile) -> Iterator[dict[str, Any]]:
    name = raw.uri.rsplit("/", 1)[-1]
    why = (
        "a hidden file (name starts with '.'): rename it to read it"
        if name.startswith(".")
        else "no reader for this name: use .jsonl/.json/.ndjson, .parquet, .warc/.wet or "
        ".txt, optionally compressed as .gz/.zst/.bz2/.xz"
    )
    yield reject(raw, raw.uri, "unsupported_format", f"{name}: {why}")


def _json_url(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    for value in (obj.get("url"), meta.get("url") if isinstance(meta, dict) else None):
        if isinstance(value, str) and value:
            return value
    return obj.get("path") if isinstance(obj.get("path"), str) else None


def _iter_jsonl(raw: RawFile) -> Iterator[dict[str, Any]]:
    with open_stream(raw.uri) as stream:
        line_no = 0
        while True:
            line_no += 1
            where = f"{raw.uri}#L{line_no}"
            try:
                line = stream.readline()
            except LineTooLong as exc:
                yield reject(raw, where, "line_too_long", str(exc))
                continue
            except Resynced as damage:
                yield reject(raw, where, "corrupt_member", lost(damage, "lines"))
                continue
            if not line:
                return
            if line_no == 1:
                line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
            if not line.strip():
                continue  # blank separator lines are not records
            yield _json_record(raw, line, where)


_NOT_METADATA = frozenset({"text", "id"})


def provenance(obj: dict[str, Any]) -> dict[str, str | None]:
    """``source_id`` (the record's own ``id``) and ``metadata`` (its other fields, as JSON)."""
    record_id = obj.get("id")
    rest = {k: v for k, v in obj.items() if k not in _NOT_METADATA}
    return {
        "source_id": None if record_id is None else writable(str(record_id)),
        "metadata": writable(json.dumps(rest, ensure_ascii=False, sort_keys=True, default=str))
        if rest
        else None,
    }


def _json_record(raw: RawFile, line: bytes, where: str) -> dict[str, Any]:
    try:
        decoded = line.decode("utf-8")
    except UnicodeDecodeError:
        repaired = decode_bytes(line)  # a non-UTF-8 line: detect its charset
        if repaired is None:
            return reject(raw, where, "undecodable", "line is not valid UTF-8")
        decoded = repaired[0]
    try:
        obj = json.loads(decoded)
    except json.JSONDecodeError as exc:
        return reject(raw, where, "malformed_json", str(exc)[:200])
    if not isinstance(obj, dict):
        return reject(raw, where, "malformed_json", f"line is a {type(obj).__name__}")
    text = obj.get("text")
    record_id = obj.get("id")
    url = _json_url(obj) or (f"{raw.uri}#{record_id}" if record_id else where)
    origin = provenance(obj)
    if text is None:
        return {**reject(raw, url, "missing_text", "'text' is absent or null"), **origin}
    if not isinstance(text, str):
        detail = f"'text' is {type(text).__name__}"
        return {**reject(raw, url, "text_not_string", detail), **origin}
    record = {"text": text, "source": raw.source, "url": url}
    # Only a \uXXXX escape can put a lone surrogate into a str (decoded bytes cannot).
    if b"\\u" in line and (problem := _unicode_problem(record)):
        return {**reject(raw, url, "invalid_unicode", problem, text), **origin}
    return {**record, **origin}


def _iter_parquet(raw: RawFile) -> Iterator[dict[str, Any]]:
    import pyarrow as pa

    schema = _parquet_schema(raw.uri)
    if "text" not in schema.names:
        yield reject(raw, raw.uri, "missing_text_column", f"columns: {schema.names}")
        return
    text_type = schema.field("text").type
    is_string = pa.types.is_string(text_type) or pa.types.is_large_string(text_type)
    row = 0
    for batch in storage.iter_table_batches(raw.uri):
        # Strings are read as bytes and decoded row by row: one invalid UTF-8 value must
        # cost its own row, not the file (pyarrow refuses the whole column otherwise).
        texts = _as_bytes(batch.column("text")) if is_string else None
        urls = _urls(batch) if "url" in schema.names else [None] * batch.num_rows
        origins = _parquet_provenance(batch)
        for i in range(batch.num_rows):
            url = urls[i] or f"{raw.uri}#row{row}"
            row += 1
            origin = origins[i]
            if texts is None:
                value = batch.column("text")[i]
                if not value.is_valid:
                    yield {**reject(raw, url, "missing_text", "null text"), **origin}
                else:
                    detail = f"'text' column is {text_type}"
                    yield {**reject(raw, url, "text_not_string", detail), **origin}
                continue
            encoded = texts[i]
            if encoded is None:
                yield {**reject(raw, url, "missing_text", "null text"), **origin}
                continue
            try:
                text = encoded.decode("utf-8")
            except UnicodeDecodeError as exc:
                detail = f"invalid UTF-8 at byte {exc.start}"
                yield {**reject(raw, url, "undecodable", detail), **origin}
                continue
            yield {"text": text, "source": raw.source, "url": url, **origin}


def _parquet_provenance(batch: Any) -> list[dict[str, str | None]]:
    """Per row, the provenance of every column but ``text`` (a column that cannot be read as
    Python values, e.g. invalid UTF-8, is left out of ``metadata``)."""
    rows: list[dict[str, Any]] = [{} for _ in range(batch.num_rows)]
    for name in batch.schema.names:
        if name == "text":
            continue
        try:
            values = batch.column(name).to_pylist()
        except (UnicodeDecodeError, ValueError):
            continue
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    return [provenance(row) for row in rows]


def _as_bytes(column: Any) -> list[bytes | None]:
    import pyarrow as pa

    binary = pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary()
    return column.view(binary).to_pylist()


def _urls(batch: Any) -> list[str | None]:
    """The ``url`` column as strings; non-string or undecodable values become None (the row's
    position names the document instead)."""
    import pyarrow as pa

    column = batch.column("url")
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return [None] * batch.num_rows
    out: list[str | None] = []
    for value in _as_bytes(column):
        try:
            out.append(value.decode("utf-8") if value else None)
        except UnicodeDecodeError:
            out.append(None)
    return out


def _parquet_schema(uri: str) -> Any:
    import pyarrow.parquet as pq

    fs, path = storage.filesystem(uri)
    with fs.open_input_file(path) as f:
        return pq.ParquetFile(f).schema_arrow


def _iter_text(raw: RawFile) -> Iterator[dict[str, Any]]:
    with open_stream(raw.uri) as stream:
        data = stream.read(MAX_LINE_BYTES)
        if stream.skip(1):
            extra = stream.skip(2**62)
            yield reject(raw, raw.uri, "record_too_long",
                          f"{MAX_LINE_BYTES + 1 + extra:,} bytes > the {MAX_LINE_BYTES:,}-byte cap")  # fmt: skip
            return
    data = data.removeprefix(b"\xef\xbb\xbf")
    if b"\x00" in data[:8192]:
        yield reject(raw, raw.uri, "binary_content", "NUL bytes in the first 8 KiB")
        return
    decoded = decode_bytes(data)
    if decoded is None:
        yield reject(raw, raw.uri, "undecodable", "no charset decodes it plausibly")
        return
    yield {"text": decoded[0], "source": raw.source, "url": raw.uri}


def _iter_metadata(raw: RawFile) -> Iterator[dict[str, Any]]:
    """A distribution's METADATA/PKG-INFO: the long description is the body after headers."""
    try:
        data = storage.read_bytes(raw.uri).decode("utf-8")
    except UnicodeDecodeError as exc:
        yield reject(raw, raw.uri, "undecodable", str(exc)[:200])
        return
    headers, _, body = data.replace("\r\n", "\n").partition("\n\n")
    if not body.strip():
        # Older PKG-INFO keeps the description in a folded header instead of the body.
        parsed = BytesHeaderParser().parsebytes(headers.encode())
        body = str(parsed.get("Description") or "").replace("\n        ", "\n")
    if not body.strip():
        yield reject(raw, raw.uri, "missing_text", "no long description")
        return
    name = BytesHeaderParser().parsebytes(headers.encode()).get("Name") or raw.uri
    yield {"text": body, "source": raw.source, "url": f"pypi:{name}"}


def _iter_warc(raw: RawFile, extract: ExtractConfig | None = None) -> Iterator[dict[str, Any]]:
    yield from iter_warc(raw, extract)
