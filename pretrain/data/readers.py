"""Read raw records from JSONL (plain/.gz/.zst), Parquet, WARC/WET, text and package METADATA.

Every input is a :class:`RawFile` (a URI, local or ``s3://``, plus the mixture source it
feeds and its kind). :func:`iter_records` streams one dict per record; bad input is never
skipped silently, it comes out as a *reject record* carrying a stable ``reason``::

    from pretrain.data.readers import RawFile, iter_records, is_reject
    raw = RawFile(uri="../shared/data/web/warc/dolma_sample-0000.warc.gz", source="web", kind="warc")
    for record in iter_records(raw):
        if is_reject(record):
            print(record["reason"], record["detail"])  # e.g. non_html, undecodable
        else:
            print(record["url"], len(record["text"]))

Good records: ``{"text", "source", "url", "source_id", "metadata"}``: ``source_id`` is the
input's own id (JSONL/Parquet ``id``, WARC-Record-ID; ``None`` for plain text), ``metadata``
every other input field as a JSON object string (``None`` when there is none); the record's
own ``source`` field, if any, is kept there, since ``source`` names the mixture source.
Reject records add ``"reason"`` and
``"detail"`` (``text`` may be ``None``). Reasons: ``malformed_json``, ``missing_text``,
``undecodable``, ``binary_content``, ``read_error`` (truncated/corrupt gzip or zstd: the
detail names the file and how many records came before), ``warc_broken_header`` (the reader
resynchronizes on the next ``WARC/`` line and says at which byte offset), ``empty_file``,
``missing_text_column``, ``non_html``, ``non_http``.

Bytes are decoded with :func:`pretrain.filters.encoding.decode_bytes` (declared charset, then
UTF-8, then detection); HTML becomes main text with resiliparse (see ``bench/RESULTS.md`` for
the measured choice), falling back to a plain tag stripper when it finds no main content.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from typing import IO, Any

from pretrain import storage
from pretrain.errors import ConfigError, DataError
from pretrain.filters.encoding import decode_bytes
from pretrain.filters.extract import extract_main_text

KINDS = ("text", "jsonl", "parquet", "warc", "metadata")
_JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".ndjson")
_WARC_SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz", ".warc.wet.gz")
_TEXT_SUFFIXES = (".txt", ".txt.gz", ".txt.zst", ".md", ".rst", ".py")


@dataclass(frozen=True)
class RawFile:
    """One input file: where it is, which mixture source it feeds, and how to parse it."""

    uri: str
    source: str
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"RawFile kind {self.kind!r} for {self.uri}: use one of {KINDS}")
        if not self.source:
            raise ConfigError(f"RawFile {self.uri} needs a source name (e.g. 'web', 'code')")


def kind_for(uri: str) -> str | None:
    """Guess the reader kind from a file name; ``None`` for names no reader handles."""
    name = uri.lower()
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(_WARC_SUFFIXES):
        return "warc"
    if name.endswith(_TEXT_SUFFIXES):
        return "text"
    return None


def is_reject(record: dict[str, Any]) -> bool:
    return record.get("reason") is not None


def _reject(raw: RawFile, url: str, reason: str, detail: str, text: str | None = None) -> dict:
    return {"text": text, "source": raw.source, "url": url, "reason": reason, "detail": detail}


def iter_records(raw: RawFile) -> Iterator[dict[str, Any]]:
    """Yield good records and reject records from ``raw`` in file order."""
    reader = {
        "jsonl": _iter_jsonl,
        "parquet": _iter_parquet,
        "warc": _iter_warc,
        "text": _iter_text,
        "metadata": _iter_metadata,
    }[raw.kind]
    if not storage.exists(raw.uri):
        # A manifest naming a missing file is a broken plan, not bad input: stop loudly.
        raise DataError(f"{raw.uri} does not exist: re-plan the shard manifests")
    count = 0
    try:
        for record in reader(raw):
            count += 1
            yield record
    except (OSError, EOFError, zlib.error, ValueError, _zstd_error()) as exc:
        # Truncated/corrupt compressed streams surface here after earlier records were yielded.
        detail = f"after {count} records of {raw.uri}: {type(exc).__name__}: {exc}"
        yield _reject(raw, raw.uri, "read_error", detail[:500])
        return
    if count == 0:
        yield _reject(raw, raw.uri, "empty_file", "no records")


def _zstd_error() -> type[Exception]:
    import zstandard

    return zstandard.ZstdError


def _open_stream(uri: str) -> IO[bytes]:
    """A binary stream of the decompressed file (gzip by magic bytes, zstd by suffix/magic)."""
    fs, path = storage.filesystem(uri)
    stream = fs.open_input_stream(path)
    head = stream.read(4)
    rest = io.BufferedReader(_Prefixed(head, stream))  # type: ignore[arg-type]
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=rest)  # type: ignore[return-value]
    if head == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(rest, read_across_frames=True)
    return rest  # type: ignore[return-value]


class _Prefixed(io.RawIOBase):
    """Re-attach already-consumed magic bytes in front of a stream."""

    def __init__(self, head: bytes, stream: Any) -> None:
        self._head, self._stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()


_NOT_METADATA = frozenset({"text", "id"})


def provenance(obj: dict[str, Any]) -> dict[str, str | None]:
    """``source_id`` (the record's own ``id``) and ``metadata`` (its other fields, as JSON)."""
    record_id = obj.get("id")
    rest = {k: v for k, v in obj.items() if k not in _NOT_METADATA}
    return {
        "source_id": None if record_id is None else str(record_id),
        "metadata": json.dumps(rest, ensure_ascii=False, sort_keys=True, default=str)
        if rest
        else None,
    }


def _json_url(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    for value in (obj.get("url"), meta.get("url") if isinstance(meta, dict) else None):
        if isinstance(value, str) and value:
            return value
    return obj.get("path") if isinstance(obj.get("path"), str) else None


def _iter_jsonl(raw: RawFile) -> Iterator[dict[str, Any]]:
    with _open_stream(raw.uri) as stream:
        for line_no, line in enumerate(stream, start=1):
            where = f"{raw.uri}#L{line_no}"
            if not line.strip():
                continue  # blank separator lines are not records
            try:
                decoded = line.decode("utf-8")
            except UnicodeDecodeError:
                repaired = decode_bytes(line)  # a non-UTF-8 line: detect its charset
                if repaired is None:
                    yield _reject(raw, where, "undecodable", "line is not valid UTF-8")
                    continue
                decoded = repaired[0]
            try:
                obj = json.loads(decoded)
            except json.JSONDecodeError as exc:
                yield _reject(raw, where, "malformed_json", str(exc)[:200])
                continue
            if not isinstance(obj, dict):
                yield _reject(raw, where, "malformed_json", f"line is a {type(obj).__name__}")
                continue
            text = obj.get("text")
            record_id = obj.get("id")
            url = _json_url(obj) or (f"{raw.uri}#{record_id}" if record_id else where)
            if not isinstance(text, str):
                reject = _reject(raw, url, "missing_text", f"'text' is {type(text).__name__}")
                yield {**reject, **provenance(obj)}
                continue
            yield {"text": text, "source": raw.source, "url": url, **provenance(obj)}


def _iter_parquet(raw: RawFile) -> Iterator[dict[str, Any]]:
    schema_names = _parquet_columns(raw.uri)
    if "text" not in schema_names:
        yield _reject(raw, raw.uri, "missing_text_column", f"columns: {schema_names}")
        return
    row = 0
    for batch in storage.iter_table_batches(raw.uri):
        for obj in batch.to_pylist():
            text, url = obj["text"], obj.get("url") or f"{raw.uri}#row{row}"
            row += 1
            if not isinstance(text, str):
                yield {**_reject(raw, url, "missing_text", "null text"), **provenance(obj)}
            else:
                yield {"text": text, "source": raw.source, "url": url, **provenance(obj)}


def _parquet_columns(uri: str) -> list[str]:
    import pyarrow.parquet as pq

    fs, path = storage.filesystem(uri)
    with fs.open_input_file(path) as f:
        return pq.ParquetFile(f).schema_arrow.names


def _iter_text(raw: RawFile) -> Iterator[dict[str, Any]]:
    with _open_stream(raw.uri) as stream:
        data = stream.read()
    if b"\x00" in data[:8192]:
        yield _reject(raw, raw.uri, "binary_content", "NUL bytes in the first 8 KiB")
        return
    decoded = decode_bytes(data)
    if decoded is None:
        yield _reject(raw, raw.uri, "undecodable", "no charset decodes it plausibly")
        return
    yield {"text": decoded[0], "source": raw.source, "url": raw.uri}


def _iter_metadata(raw: RawFile) -> Iterator[dict[str, Any]]:
    """A distribution's METADATA/PKG-INFO: the long description is the body after headers."""
    try:
        data = storage.read_bytes(raw.uri).decode("utf-8")
    except UnicodeDecodeError as exc:
        yield _reject(raw, raw.uri, "undecodable", str(exc)[:200])
        return
    headers, _, body = data.replace("\r\n", "\n").partition("\n\n")
    if not body.strip():
        # Older PKG-INFO keeps the description in a folded header instead of the body.
        parsed = BytesHeaderParser().parsebytes(headers.encode())
        body = str(parsed.get("Description") or "").replace("\n        ", "\n")
    if not body.strip():
        yield _reject(raw, raw.uri, "missing_text", "no long description")
        return
    name = BytesHeaderParser().parsebytes(headers.encode()).get("Name") or raw.uri
    yield {"text": body, "source": raw.source, "url": f"pypi:{name}"}


# ---------------------------------------------------------------- WARC / WET


def _iter_warc(raw: RawFile) -> Iterator[dict[str, Any]]:
    with _open_stream(raw.uri) as stream:
        for headers, block in _warc_records(_Counting(stream)):
            if "_broken" in headers:
                yield _reject(raw, f"{raw.uri}@{headers['_offset']}", "warc_broken_header",
                              headers["_broken"])  # fmt: skip
                continue
            warc_type = headers.get("warc-type", "")
            url = headers.get("warc-target-uri", "").strip("<>") or raw.uri
            if warc_type == "conversion":  # WET: the block is already extracted text
                for record in _decoded(raw, url, block, None, html=False):
                    yield {**record, **_warc_provenance(headers)}
            elif warc_type == "response":
                if not url.startswith(("http:", "https:")):
                    yield _reject(raw, url, "non_http", headers.get("content-type", ""))
                    continue
                for record in _http_response(raw, url, block):
                    yield {**record, **_warc_provenance(headers)}
            # request/metadata/warcinfo/resource records are crawl bookkeeping, not documents.


def _warc_provenance(headers: dict[str, str]) -> dict[str, str | None]:
    meta = {k: headers[k] for k in ("warc-date", "warc-type", "content-type") if k in headers}
    return {
        "source_id": headers.get("warc-record-id", "").strip("<>") or None,
        "metadata": json.dumps(meta, sort_keys=True) if meta else None,
    }


class _Counting:
    """A byte stream that knows its offset (to name where a broken record starts)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream, self.offset = stream, 0

    def readline(self) -> bytes:
        line = self._stream.readline()
        self.offset += len(line)
        return line

    def read(self, n: int) -> bytes:
        data = self._stream.read(n)
        self.offset += len(data)
        return data


def _warc_records(stream: _Counting) -> Iterator[tuple[dict[str, str], bytes]]:
    """(headers, block) per record; a broken header yields ``{"_broken", "_offset"}`` once and
    the reader skips to the next line that starts a WARC record."""
    line = stream.readline()
    while line:
        if not line.strip():
            line = stream.readline()
            continue  # record separators (CRLF CRLF), tolerated in any number
        start = stream.offset - len(line)
        if not line.startswith(b"WARC/"):
            yield {"_broken": f"expected a WARC version line, got {line[:40]!r}",
                   "_offset": str(start)}, b""  # fmt: skip
            line = _skip_to_next_record(stream)
            continue
        headers: dict[str, str] = {}
        while (line := stream.readline()).strip():
            key, _, value = line.decode("utf-8", "replace").partition(":")
            headers[key.strip().lower()] = value.strip()
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            yield {"_broken": f"Content-Length {length_text[:40]!r}", "_offset": str(start)}, b""
            line = _skip_to_next_record(stream)
            continue
        block = stream.read(int(length_text))
        if len(block) < int(length_text):
            raise EOFError(
                f"truncated WARC record at byte {start} ({len(block)}/{length_text} bytes)"
            )
        yield headers, block
        line = stream.readline()


def _skip_to_next_record(stream: _Counting) -> bytes:
    while (line := stream.readline()) and not line.startswith(b"WARC/1."):
        pass
    return line


def _http_response(raw: RawFile, url: str, block: bytes) -> Iterator[dict[str, Any]]:
    # Old crawlers (ClueWeb) end HTTP header lines with a bare LF, so split on either.
    sep = min((i for i in (block.find(b"\r\n\r\n"), block.find(b"\n\n")) if i >= 0), default=-1)
    if sep < 0:
        yield _reject(raw, url, "read_error", "HTTP response without header terminator")
        return
    head, body = block[:sep], block[sep:].lstrip(b"\r\n")
    fields: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines()[1:]:
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip()
    content_type = fields.get("content-type", "").lower()
    if "html" not in content_type:
        yield _reject(raw, url, "non_html", content_type or "no content-type")
        return
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    if fields.get("content-encoding", "").lower() in ("gzip", "x-gzip", "deflate"):
        try:
            body = zlib.decompress(body, 47)  # 47 = auto-detect zlib/gzip header
        except zlib.error:
            pass  # ClueWeb quirk: the header says gzip but the stored body is plain
    charset = content_type.partition("charset=")[2].split(";")[0].strip(" \"'") or None
    if charset is None and (meta := _META_CHARSET.search(body[:4096])):
        charset = meta.group(1).decode("ascii").lower()
    yield from _decoded(raw, url, body, charset, html=True)


_META_CHARSET = re.compile(rb"<meta[^>]+charset=[\"']?([A-Za-z0-9_-]+)", re.IGNORECASE)


def _dechunk(body: bytes) -> bytes:
    out, pos = bytearray(), 0
    while pos < len(body):
        end = body.find(b"\r\n", pos)
        if end < 0:
            break
        try:
            size = int(body[pos:end].split(b";")[0], 16)
        except ValueError:
            return body  # not actually chunked; keep the bytes as they are
        if size == 0:
            break
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2
    return bytes(out)


def _decoded(
    raw: RawFile, url: str, body: bytes, charset: str | None, *, html: bool
) -> Iterator[dict[str, Any]]:
    decoded = decode_bytes(body, charset)
    if decoded is None:
        yield _reject(raw, url, "undecodable", f"charset={charset!r}")
        return
    text = decoded[0]
    yield {"text": extract_main_text(text) if html else text, "source": raw.source, "url": url}
