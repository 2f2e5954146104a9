"""The document data contract shared by every data stage.

Documents are Parquet, one row per document. Rejected documents go to a sibling
``rejects`` table with the same columns plus ``stage``, ``reason`` and ``detail``, so that
``documents in = kept + rejected`` can always be reconciled.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

DOCUMENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),  # stable content hash (see doc_id)
        ("text", pa.string()),
        ("source", pa.string()),  # mixture source name, e.g. "code", "prose", "license", "web"
        ("url", pa.string()),  # URL or path the text came from
        ("language", pa.string()),
        ("language_score", pa.float32()),
        ("quality_score", pa.float32()),
        ("toxicity_score", pa.float32()),  # share of toxic sentences (pretrain.filters.toxicity)
        ("num_chars", pa.int64()),
    ]
)

REJECT_SCHEMA = (
    DOCUMENT_SCHEMA.append(pa.field("stage", pa.string()))
    .append(pa.field("reason", pa.string()))
    .append(pa.field("detail", pa.string()))
)


def doc_id(text: str, source: str = "", url: str = "") -> str:
    """Stable id: sha1 of source, url and text (same bytes in → same id, on every machine)."""
    h = hashlib.sha1()
    for part in (source, url, text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def empty_documents() -> pa.Table:
    return DOCUMENT_SCHEMA.empty_table()


def empty_rejects() -> pa.Table:
    return REJECT_SCHEMA.empty_table()


def documents_table(rows: list[dict]) -> pa.Table:
    """Build a documents table from dicts, filling optional columns with nulls."""
    return pa.Table.from_pylist(
        [{name: row.get(name) for name in DOCUMENT_SCHEMA.names} for row in rows],
        schema=DOCUMENT_SCHEMA,
    )


def rejects_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(
        [{name: row.get(name) for name in REJECT_SCHEMA.names} for row in rows],
        schema=REJECT_SCHEMA,
    )
