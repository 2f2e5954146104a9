"""What every raw reader yields: the input file (:class:`RawFile`), document and reject records.

A record is a dict; a reject carries ``reason`` and ``detail`` (see :func:`reject`). Shared by
:mod:`pretrain.data.readers` and :mod:`pretrain.data.warc`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pretrain.data.streams import Resynced
from pretrain.errors import ConfigError

KINDS = ("text", "jsonl", "parquet", "warc", "metadata", "unsupported")


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


def is_reject(record: dict[str, Any]) -> bool:
    return record.get("reason") is not None


def reject(raw: RawFile, url: str, reason: str, detail: str, text: str | None = None) -> dict:
    return {
        "text": None if text is None else writable(text),
        "source": raw.source,
        "url": writable(url),
        "reason": reason,
        "detail": writable(detail),
    }


def writable(value: str) -> str:
    """``value`` with lone surrogates replaced, so that a reject row can always be written."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")


def lost(damage: Resynced, unit: str) -> str:
    if unit == "records":  # WARC files hold one record per gzip member
        return f"{damage.members} record(s) lost: {damage.detail}"
    return (
        f"the {unit} inside {damage.compressed_bytes:,} compressed bytes are lost: {damage.detail}"
    )
