"""The document data contract shared by every data stage.

Documents are Parquet, one row per document. ``id`` is our content hash; ``source_id`` is the
input record's own id (JSONL/Parquet ``id``, WARC-Record-ID), ``source`` the mixture source
name, ``url`` where the text came from, and ``metadata`` every other field of the input
record as a JSON object (the input's own ``source`` field included), so outputs join back
to the user's records. Rejected documents go to a sibling
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
        # provenance: the input record's own id, and its other fields as a JSON object
        ("source_id", pa.string()),
        ("metadata", pa.string()),
        ("chars_removed", pa.int64()),  # characters line rules cut from the text (filter)
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


def conform(table: pa.Table, schema: pa.Schema = DOCUMENT_SCHEMA) -> pa.Table:
    """``table`` with ``schema``'s columns in order; columns it lacks (older shards) are null."""
    columns = [
        table[name].cast(field.type)
        if name in table.schema.names
        else pa.nulls(table.num_rows, field.type)
        for name, field in zip(schema.names, schema, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=schema) if columns else table


def documents_table(rows: list[dict]) -> pa.Table:
    """Build a documents table from dicts, filling optional columns with nulls."""
    return pa.Table.from_pylist(
        [{name: row.get(name) for name in DOCUMENT_SCHEMA.names} for row in rows],
        schema=DOCUMENT_SCHEMA,
    )
