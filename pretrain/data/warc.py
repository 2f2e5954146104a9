"""WARC/WET records → documents: HTTP responses (HTML → main text) and WET conversions.

Used by :func:`pretrain.data.readers.iter_records` for ``kind="warc"``; rejects follow its
reasons. A broken header is a ``warc_broken_header`` reject and the reader resynchronizes on
the next ``WARC/`` line; a corrupt gzip member (WARC writes one per record) is a
``corrupt_member`` reject that counts the records lost, and reading resumes at the next
intact member; a record longer than the line cap is skipped without being held::

    from pretrain.data.readers import RawFile
    from pretrain.data.warc import iter_warc
    for record in iter_warc(RawFile(uri="crawl.warc.gz", source="web", kind="warc")):
        print(record.get("reason"), record["url"])
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from typing import Any

from pretrain.data.encoding import decode_bytes
from pretrain.data.extract import ExtractConfig, extract_main_text
from pretrain.data.records import RawFile, lost, reject
from pretrain.data.streams import LineStream, LineTooLong, Resynced, open_stream


def iter_warc(raw: RawFile, extract: ExtractConfig | None = None) -> Iterator[dict[str, Any]]:
    """Documents and rejects of one WARC/WET file; HTML responses go through ``extract``."""
    extract = extract or ExtractConfig()
    with open_stream(raw.uri) as stream:
        while True:
            try:
                for headers, block in _warc_records(stream):
                    yield from _warc_documents(raw, headers, block, extract)
                return
            except Resynced as damage:  # resume at the next intact gzip member
                where = f"{raw.uri}@{stream.offset}"
                yield reject(raw, where, "corrupt_member", lost(damage, "records"))
            except LineTooLong as exc:  # a header line without end: resync on "WARC/"
                where = f"{raw.uri}@{stream.offset}"
                yield reject(raw, where, "warc_broken_header", f"header line: {exc}")


def _warc_documents(
    raw: RawFile, headers: dict[str, str], block: bytes, extract: ExtractConfig
) -> Iterator[dict]:
    if "_broken" in headers:
        yield reject(raw, f"{raw.uri}@{headers['_offset']}", headers.get("_reason",
                      "warc_broken_header"), headers["_broken"])  # fmt: skip
        return
    warc_type = headers.get("warc-type", "")
    url = headers.get("warc-target-uri", "").strip("<>") or raw.uri
    origin = _warc_provenance(headers)
    if warc_type == "conversion":  # WET: the block is already extracted text
        for record in _decoded(raw, url, block, None, html=None):
            yield {**record, **origin}
    elif warc_type == "response":
        if not url.startswith(("http:", "https:")):
            yield reject(raw, url, "non_http", headers.get("content-type", ""))
            return
        for record in _http_response(raw, url, block, extract):
            yield {**record, **origin}
    # request/metadata/warcinfo/resource records are crawl bookkeeping, not documents.


def _warc_provenance(headers: dict[str, str]) -> dict[str, str | None]:
    """``source_id`` is the WARC-Record-ID; date, type and content type go to ``metadata``."""
    meta = {k: headers[k] for k in ("warc-date", "warc-type", "content-type") if k in headers}
    return {
        "source_id": headers.get("warc-record-id", "").strip("<>") or None,
        "metadata": json.dumps(meta, sort_keys=True) if meta else None,
    }


def _warc_records(stream: LineStream) -> Iterator[tuple[dict[str, str], bytes]]:
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
        length = int(length_text)
        if length > stream.max_line_bytes:  # skipped without holding it (a bomb costs nothing)
            skipped = stream.skip(length)
            yield {"_broken": f"record of {length:,} bytes > the {stream.max_line_bytes:,}-byte "
                   "cap", "_offset": str(start), "_reason": "record_too_long"}, b""  # fmt: skip
            if skipped < length:
                raise EOFError(f"truncated WARC record at byte {start} ({skipped}/{length} bytes)")
            line = stream.readline()
            continue
        block = stream.read(length)
        if len(block) < length:
            raise EOFError(f"truncated WARC record at byte {start} ({len(block)}/{length} bytes)")
        yield headers, block
        line = stream.readline()


def _skip_to_next_record(stream: LineStream) -> bytes:
    while True:
        try:
            line = stream.readline()
        except LineTooLong:
            continue
        if not line or line.startswith(b"WARC/1."):
            return line


def _http_response(
    raw: RawFile, url: str, block: bytes, extract: ExtractConfig
) -> Iterator[dict[str, Any]]:
    # Old crawlers (ClueWeb) end HTTP header lines with a bare LF, so split on either.
    sep = min((i for i in (block.find(b"\r\n\r\n"), block.find(b"\n\n")) if i >= 0), default=-1)
    if sep < 0:
        yield reject(raw, url, "read_error", "HTTP response without header terminator")
        return
    head, body = block[:sep], block[sep:].lstrip(b"\r\n")
    fields: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines()[1:]:
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip()
    content_type = fields.get("content-type", "").lower()
    if "html" not in content_type:
        yield reject(raw, url, "non_html", content_type or "no content-type")
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
    yield from _decoded(raw, url, body, charset, html=extract)


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
    raw: RawFile, url: str, body: bytes, charset: str | None, *, html: ExtractConfig | None
) -> Iterator[dict[str, Any]]:
    decoded = decode_bytes(body, charset)
    if decoded is None:
        yield reject(raw, url, "undecodable", f"charset={charset!r}")
        return
    text = decoded[0]
    text = extract_main_text(text, html) if html is not None else text
    yield {"text": text, "source": raw.source, "url": url}
