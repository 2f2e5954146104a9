"""Decompressed byte streams that survive damage and never hold an unbounded line.

:func:`open_stream` opens a raw file (local or ``s3://``) and picks the codec from the magic
bytes (gzip, zstd, bzip2, xz; anything else is read as is). The result is a
:class:`LineStream`: ``readline()`` returns one line but never more than ``max_line_bytes``
(a longer line is skipped to its end and reported as :class:`LineTooLong`, so a gzip bomb of
zeros costs one buffer, not its decompressed size), and ``read(n)`` reads a block::

    from pretrain.data.streams import open_stream, Resynced, LineTooLong
    with open_stream("crawl.warc.gz") as stream:
        try:
            line = stream.readline()
        except Resynced as damage:   # a corrupt gzip member was skipped
            print(damage.detail)     # "gzip member at byte 5120 is corrupt (...): skipped 1
                                     #  member(s), 812 compressed bytes; reading resumes at 5932"

Gzip files are often many concatenated members (WARC writes one per record). When a member
is corrupt, the gzip stream resynchronizes on the next member header and raises
:class:`Resynced` once, after the intact data before the damage was delivered; the caller
drops its partial record, reports the loss and keeps reading. A stream cut short raises
``EOFError`` naming the compressed byte offset.
"""

from __future__ import annotations

import zlib
from typing import IO, Any, cast

from pretrain import storage

MAX_LINE_BYTES = 32 * 2**20  # a JSONL line (one document) longer than this is a reject
CHUNK_BYTES = 2**20  # compressed bytes read at a time
_GZIP_MAGIC = b"\x1f\x8b\x08"


class Resynced(Exception):
    """Damaged compressed data was skipped; ``members``/``compressed_bytes`` say how much."""

    def __init__(self, detail: str, *, members: int, compressed_bytes: int) -> None:
        super().__init__(detail)
        self.detail, self.members, self.compressed_bytes = detail, members, compressed_bytes


class LineTooLong(Exception):
    """A line exceeded the cap; it was consumed up to its newline (``length`` bytes)."""

    def __init__(self, length: int, cap: int) -> None:
        super().__init__(f"line of {length:,} bytes exceeds the {cap:,}-byte cap")
        self.length = length


class _GzipMembers:
    """Concatenated gzip members, decompressed in chunks; a corrupt member is skipped."""

    def __init__(self, raw: Any) -> None:
        self._raw, self._in, self._in_offset = raw, b"", 0  # offset of _in[0] in the file
        self._member_start, self._decomp = 0, zlib.decompressobj(31)
        self._damage: Resynced | None = None
        self._eof = False

    def _more_input(self) -> bool:
        chunk = self._raw.read(CHUNK_BYTES)
        if chunk:
            self._in += chunk
        return bool(chunk)

    def read(self, n: int) -> bytes:
        if self._damage is not None:
            damage, self._damage = self._damage, None
            raise damage
        while not self._eof:
            if not self._in and not self._more_input():
                if self._decomp.eof or self._at_member_boundary():
                    self._eof = True
                    break
                raise EOFError(
                    f"compressed stream ends inside the gzip member that starts at byte "
                    f"{self._member_start} (file cut short at byte {self._in_offset})"
                )
            try:
                out = self._decomp.decompress(self._in, n)
            except zlib.error as exc:
                self._resync(exc)
                if self._damage is not None:
                    damage, self._damage = self._damage, None
                    raise damage from None
                continue
            consumed = len(self._in) - len(self._decomp.unconsumed_tail)
            if self._decomp.eof:
                consumed = len(self._in) - len(self._decomp.unused_data)
            self._in, self._in_offset = self._in[consumed:], self._in_offset + consumed
            if self._decomp.eof:
                self._member_start, self._decomp = self._in_offset, zlib.decompressobj(31)
            if out:
                return out
        return b""

    def _at_member_boundary(self) -> bool:
        return self._in_offset == self._member_start

    def _resync(self, exc: zlib.error) -> None:
        """Skip to the next gzip header after the damaged member's start that decodes."""
        bad_start, members = self._member_start, 0
        search_from = bad_start + 1
        while True:
            members += 1
            # Bring the buffer to the search position, then look for the next header.
            while True:
                rel = max(0, search_from - self._in_offset)
                hit = self._in.find(_GZIP_MAGIC, rel)
                if hit >= 0:
                    break
                keep = max(0, len(self._in) - len(_GZIP_MAGIC) + 1)
                self._in, self._in_offset = self._in[keep:], self._in_offset + keep
                search_from = self._in_offset
                if not self._more_input():
                    hit = -1
                    break
            if hit < 0:  # no later member: the rest of the file is lost
                end = self._in_offset + len(self._in)
                self._in, self._in_offset, self._eof = b"", end, True
                self._member_start = end
                self._damage = Resynced(
                    f"gzip member at byte {bad_start} is corrupt ({exc}); no intact member "
                    f"follows: {end - bad_start:,} compressed bytes to the end are lost",
                    members=members,
                    compressed_bytes=end - bad_start,
                )
                return
            start = self._in_offset + hit
            probe = zlib.decompressobj(31)
            try:
                probe.decompress(self._in[hit : hit + 4096], 1)
            except zlib.error:
                search_from = start + 1  # a false header inside the damaged bytes
                continue
            self._in, self._in_offset = self._in[hit:], start
            self._member_start, self._decomp = start, zlib.decompressobj(31)
            self._damage = Resynced(
                f"gzip member at byte {bad_start} is corrupt ({exc}): skipped {members} "
                f"member(s), {start - bad_start:,} compressed bytes; reading resumes at {start}",
                members=members,
                compressed_bytes=start - bad_start,
            )
            return

    def close(self) -> None:
        self._raw.close()


class _ZstdFrames:
    """Concatenated zstd frames; a file cut inside a frame raises ``EOFError``.

    ``decompressobj`` cannot cap its output, so input is fed in pieces sized from the last
    ratio (1 KiB at the least): a zstd bomb yields at most tens of MiB per call.
    """

    def __init__(self, raw: Any) -> None:
        import zstandard

        self._new = zstandard.ZstdDecompressor().decompressobj
        self._raw, self._decomp, self._in, self._piece = raw, self._new(), b"", 65536
        self._consumed = 0  # compressed bytes fed so far
        self._frame_start, self._started = 0, False

    def read(self, n: int) -> bytes:
        while True:
            if not self._in:
                self._in = self._raw.read(CHUNK_BYTES)
                if not self._in:
                    if self._started:
                        raise EOFError(
                            f"compressed stream ends inside the zstd frame that starts at "
                            f"byte {self._frame_start} (file cut short at byte {self._consumed})"
                        )
                    return b""
            piece, self._in = self._in[: self._piece], self._in[self._piece :]
            self._consumed += len(piece)
            self._started = True
            out = self._decomp.decompress(piece)
            if self._decomp.eof:
                rest = self._decomp.unused_data
                self._in, self._consumed = rest + self._in, self._consumed - len(rest)
                self._decomp, self._started = self._new(), False
                self._frame_start = self._consumed
            if out:
                self._piece = max(1024, min(CHUNK_BYTES, len(piece) * max(n, 1) // len(out)))
                return out

    def close(self) -> None:
        self._raw.close()


class _Plain:
    """An uncompressed stream (or one a library decompresses) behind the same ``read``."""

    def __init__(self, head: bytes, stream: Any) -> None:
        self._head, self._stream = head, stream

    def read(self, n: int) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._stream.read(n)

    def close(self) -> None:
        self._stream.close()


class LineStream:
    """``readline``/``read``/iteration over a chunk source with a capped line buffer."""

    def __init__(self, source: Any, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._source, self.max_line_bytes = source, max_line_bytes
        # immutable bytes: a line is one slice (a bytearray would copy twice); a fill copies
        # the unread rest once per CHUNK_BYTES
        self._buf: bytes | bytearray = b""
        self._pos = 0
        self.offset = 0  # decompressed bytes handed out so far

    def _fill(self) -> bool:
        try:
            chunk = self._source.read(CHUNK_BYTES)
        except Resynced:
            self._buf, self._pos = b"", 0  # the partial record before the damage is lost too
            raise
        if len(self._buf) - self._pos > 4 * CHUNK_BYTES:
            # a long line: grow in place (concatenating bytes would hold two copies of it)
            if isinstance(self._buf, bytes):
                self._buf = bytearray(self._buf[self._pos :])
            else:
                del self._buf[: self._pos]
            self._buf += chunk
        else:
            self._buf = bytes(self._buf[self._pos :]) + chunk
        self._pos = 0
        return bool(chunk)

    def readline(self) -> bytes:
        """The next line with its newline (``b""`` at the end); raises LineTooLong."""
        start = self._pos
        while True:
            end = self._buf.find(b"\n", start)
            if end >= 0 and end - self._pos >= self.max_line_bytes:
                return self._skip_long_line()
            if end >= 0:
                line = bytes(self._buf[self._pos : end + 1])
                self._pos = end + 1
                self.offset += len(line)
                return line
            if len(self._buf) - self._pos > self.max_line_bytes:
                return self._skip_long_line()
            start = len(self._buf) - self._pos
            if not self._fill():
                line = bytes(self._buf[self._pos :])
                self._buf, self._pos = b"", 0
                self.offset += len(line)
                return line
            start = self._pos + start

    def _skip_long_line(self) -> bytes:
        length = 0
        while True:
            end = self._buf.find(b"\n", self._pos)
            if end >= 0:
                length += end + 1 - self._pos
                self._pos = end + 1
                break
            length += len(self._buf) - self._pos
            self._buf, self._pos = b"", 0
            if not self._fill():
                break
        self.offset += length
        raise LineTooLong(length, self.max_line_bytes)

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only at the end of the stream)."""
        while len(self._buf) - self._pos < n and self._fill():
            pass
        out = bytes(self._buf[self._pos : self._pos + n])
        self._pos += len(out)
        self.offset += len(out)
        return out

    def skip(self, n: int) -> int:
        """Discard up to ``n`` bytes without holding them; returns how many were skipped."""
        skipped = 0
        while skipped < n:
            if self._pos >= len(self._buf) and not self._fill():
                break
            take = min(n - skipped, len(self._buf) - self._pos)
            self._pos += take
            skipped += take
        self.offset += skipped
        return skipped

    def __iter__(self) -> LineStream:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> LineStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_stream(uri: str, max_line_bytes: int = MAX_LINE_BYTES) -> LineStream:
    """A :class:`LineStream` over the decompressed content of ``uri`` (codec by magic)."""
    fs, path = storage.filesystem(uri)
    raw: IO[bytes] = fs.open_input_stream(path, compression=None)
    head = raw.read(6)
    if head[:3] == _GZIP_MAGIC:
        source: Any = _GzipMembers(_Plain(head, raw))
    elif head[:4] == b"\x28\xb5\x2f\xfd":
        source = _ZstdFrames(_Plain(head, raw))
    elif head[:3] == b"BZh":
        import bz2

        source = _Plain(b"", bz2.BZ2File(_Readable.over(_Plain(head, raw))))
    elif head == b"\xfd7zXZ\x00":
        import lzma

        source = _Plain(b"", lzma.LZMAFile(_Readable.over(_Plain(head, raw))))
    else:
        source = _Plain(head, raw)
    return LineStream(source, max_line_bytes)


class _Readable:
    """The minimal file object bz2/lzma need on top of a ``read``-only source."""

    def __init__(self, source: Any) -> None:
        self._source = source

    @classmethod
    def over(cls, source: Any) -> IO[bytes]:
        """``source`` as the file object bz2/lzma take: they only read and close it."""
        return cast(IO[bytes], cls(source))

    def read(self, n: int = -1) -> bytes:
        return self._source.read(CHUNK_BYTES if n is None or n < 0 else n)

    def close(self) -> None:
        self._source.close()

    closed = False

    def readable(self) -> bool:
        return True
