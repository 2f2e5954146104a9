"""Apply the global dedup decisions to one shard: drop non-survivors, cut boilerplate lines.

Removed documents go to ``rejects.parquet`` with ``stage="dedup"``, reason
``exact_duplicate``/``url_duplicate``/``near_duplicate`` and ``detail`` = the survivor's id,
so a person can see what each removed document duplicated. When ``boilerplate.parquet`` sits
next to ``clusters.parquet`` its lines/paragraphs are cut from the kept texts; a text left
empty goes to rejects with reason ``boilerplate_only``::

    from pretrain.dedup.apply import apply_dedup
    stats = apply_dedup(
        ".pretrain/artifacts/filtered_shards/s0/documents.parquet",
        ".pretrain/artifacts/dedup_clusters/clusters.parquet",
        ".pretrain/artifacts/deduped_shards/s0",
    )
    stats.as_metadata()  # {"documents_in": 240, "kept": 231, "removed": 9, ...}

Output folder: ``documents.parquet`` (input order kept), ``rejects.parquet``, ``stats.json``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from pretrain import storage
from pretrain.data.schema import REJECT_SCHEMA, conform
from pretrain.dedup.config import LineDedupConfig
from pretrain.dedup.lines import remove_boilerplate
from pretrain.errors import DataError

STAGE = "dedup"
BOILERPLATE_ONLY = "boilerplate_only"


@dataclass(frozen=True, kw_only=True)
class DedupApplyStats:
    documents_in: int
    kept: int
    removed: dict[str, int] = field(default_factory=dict)
    chars_in: int = 0
    chars_kept: int = 0
    lines_removed: int = 0  # boilerplate lines/paragraphs cut from kept documents
    documents_trimmed: int = 0  # kept documents that lost at least one boilerplate line
    chars_removed_boilerplate: int = 0  # characters those lines held (also added per document)

    def __post_init__(self) -> None:
        if self.documents_in != self.kept + sum(self.removed.values()):
            raise DataError(
                f"dedup accounting broken: {self.documents_in} in != {self.kept} kept + "
                f"{sum(self.removed.values())} removed"
            )

    def as_metadata(self) -> dict[str, int | float | str]:
        num_removed = sum(self.removed.values())
        out: dict[str, int | float | str] = {
            "documents_in": self.documents_in,
            "kept": self.kept,
            "removed": num_removed,
            "removed_rate": round(num_removed / self.documents_in, 6) if self.documents_in else 0.0,
            "chars_in": self.chars_in,
            "chars_kept": self.chars_kept,
            "lines_removed": self.lines_removed,
            "documents_trimmed": self.documents_trimmed,
            "chars_removed_boilerplate": self.chars_removed_boilerplate,
        }
        out.update({f"removed_{reason}": n for reason, n in sorted(self.removed.items())})
        return out


def apply_dedup(input_uri: str, clusters_uri: str, output_dir_uri: str) -> DedupApplyStats:
    """Drop every clustered document that is not its cluster's survivor; cut boilerplate."""
    documents = storage.read_table(input_uri)
    if "id" not in documents.schema.names:
        raise DataError(f"{input_uri} has no 'id' column: not a documents table")
    documents = conform(documents)  # provenance columns pass through; older shards get nulls
    clusters = storage.read_table(clusters_uri, columns=["id", "survivor_id", "reason"])
    removed = clusters.filter(pc.not_equal(clusters["id"], clusters["survivor_id"]))

    position = pc.index_in(documents["id"], value_set=removed["id"])
    is_removed = pc.is_valid(position)
    kept = documents.filter(pc.invert(is_removed))
    dropped = documents.filter(is_removed)
    dropped_position = position.filter(is_removed)
    rejects = _rejects(
        dropped,
        removed["reason"].take(dropped_position),
        removed["survivor_id"].take(dropped_position),
    )

    kept, repeated = _drop_repeated(kept, is_removed, input_uri, clusters_uri)
    rejects = pa.concat_tables([rejects, repeated])
    chars_before = _chars_removed(kept)
    kept, emptied, lines_removed, trimmed = _cut_boilerplate(kept, clusters_uri)
    if emptied.num_rows:
        detail = pa.array(["every line was boilerplate"] * emptied.num_rows, pa.string())
        reasons = pa.array([BOILERPLATE_ONLY] * emptied.num_rows, pa.string())
        rejects = pa.concat_tables([rejects, _rejects(emptied, reasons, detail)])

    stats = DedupApplyStats(
        documents_in=documents.num_rows,
        kept=kept.num_rows,
        removed=dict(sorted(Counter(rejects["reason"].to_pylist()).items())),
        chars_in=_chars(documents),
        chars_kept=_chars(kept),
        lines_removed=lines_removed,
        documents_trimmed=trimmed,
        chars_removed_boilerplate=_chars_removed(kept) - chars_before + _chars_removed(emptied),
    )
    storage.write_table(kept, storage.join(output_dir_uri, "documents.parquet"))
    storage.write_table(rejects, storage.join(output_dir_uri, "rejects.parquet"))
    storage.write_json(
        {**asdict(stats), "input": input_uri, "clusters": clusters_uri},
        storage.join(output_dir_uri, "stats.json"),
    )
    return stats


def _drop_repeated(
    kept: pa.Table, is_removed: pa.ChunkedArray, input_uri: str, clusters_uri: str
) -> tuple[pa.Table, pa.Table]:
    """Remove the extra copies of ids that another shard also holds (``repeated.parquet``)."""
    repeated_uri = storage.join(clusters_uri.rsplit("/", 1)[0], "repeated.parquet")
    if not storage.exists(repeated_uri):
        return kept, _rejects(
            kept.slice(0, 0), pa.array([], pa.string()), pa.array([], pa.string())
        )
    repeated = storage.read_table(repeated_uri)
    here = storage.filesystem(input_uri)[1]  # compare absolute paths, however each was given
    same = [storage.filesystem(uri)[1] == here for uri in repeated["documents"].to_pylist()]
    mine = repeated.filter(pa.array(same, pa.bool_()))
    # rows in repeated.parquet count the input table; map them onto the rows kept so far
    input_rows = (
        pc.indices_nonzero(pc.invert(is_removed)) if len(is_removed) else pa.array([], pa.uint64())
    )
    position = pc.index_in(input_rows.cast(pa.int64()), value_set=mine["row"])
    drop = pc.is_valid(position)
    copies = kept.filter(drop)
    at = position.filter(drop)
    details = pc.binary_join_element_wise(
        pa.array(["same id kept in "] * copies.num_rows, pa.string()),
        mine["kept_documents"].take(at),
        pa.array([" row "] * copies.num_rows, pa.string()),
        pc.cast(mine["kept_row"].take(at), pa.string()),
        "",
    )
    reasons = pa.array(["repeated_id"] * copies.num_rows, pa.string())
    return kept.filter(pc.invert(drop)), _rejects(copies, reasons, details)


def _rejects(documents: pa.Table, reasons: pa.Array, details: pa.Array) -> pa.Table:
    stage = pa.array([STAGE] * documents.num_rows, pa.string())
    return (
        documents.append_column("stage", stage)
        .append_column("reason", reasons)
        .append_column("detail", details)
        .cast(REJECT_SCHEMA)
    )


def _cut_boilerplate(kept: pa.Table, clusters_uri: str) -> tuple[pa.Table, pa.Table, int, int]:
    """(kept with lines cut, documents left empty, lines removed, documents trimmed)."""
    boilerplate_uri = storage.join(clusters_uri.rsplit("/", 1)[0], "boilerplate.parquet")
    if not storage.exists(boilerplate_uri):
        return kept, kept.slice(0, 0), 0, 0
    table = storage.read_table(boilerplate_uri)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if table.num_rows == 0:
        return kept, kept.slice(0, 0), 0, 0
    config = LineDedupConfig(
        min_documents=2,  # only the unit settings matter when cutting
        unit=meta["lines.unit"],
        min_chars=int(meta["lines.min_chars"]),
        skip_sources=tuple(s for s in meta["lines.skip_sources"].split(",") if s),
    )
    texts, removed = remove_boilerplate(
        kept["text"], kept["source"], table.column("h").to_numpy(), config
    )
    trimmed = pa.array(removed > 0)
    num_chars = pc.if_else(trimmed, pc.utf8_length(texts).cast(pa.int64()), kept["num_chars"])
    # a line-removing rule like the filter's: add what it cut to the document's chars_removed
    cut = pc.subtract(
        pc.utf8_length(kept["text"]).cast(pa.int64()), pc.utf8_length(texts).cast(pa.int64())
    )
    chars_removed = pc.add(pc.fill_null(kept["chars_removed"], 0), pc.fill_null(cut, 0))
    kept = kept.set_column(
        kept.schema.get_field_index("chars_removed"), "chars_removed", chars_removed
    )
    blank = pc.and_(trimmed, pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(texts)), 0))
    emptied = kept.filter(blank)  # original text in rejects, for audit
    kept = kept.set_column(kept.schema.get_field_index("text"), "text", texts)
    kept = kept.set_column(kept.schema.get_field_index("num_chars"), "num_chars", num_chars)
    return kept.filter(pc.invert(blank)), emptied, int(removed.sum()), int((removed > 0).sum())


def _chars_removed(table: pa.Table) -> int:
    return int(pc.sum(table["chars_removed"]).as_py() or 0)


def _chars(table: pa.Table) -> int:
    return int(pc.sum(table["num_chars"]).as_py() or 0)
