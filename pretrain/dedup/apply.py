"""Apply the global dedup clusters to one shard: keep survivors and unclustered documents.

Removed documents go to ``rejects.parquet`` with ``stage="dedup"``, reason
``exact_duplicate``/``near_duplicate`` and ``detail`` = the survivor's id, so a person can see
what each removed document duplicated::

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
from pretrain.data.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA
from pretrain.errors import DataError

STAGE = "dedup"


@dataclass(frozen=True, kw_only=True)
class DedupApplyStats:
    documents_in: int
    kept: int
    removed: dict[str, int] = field(default_factory=dict)
    chars_in: int = 0
    chars_kept: int = 0

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
        }
        out.update({f"removed_{reason}": n for reason, n in sorted(self.removed.items())})
        return out


def apply_dedup(input_uri: str, clusters_uri: str, output_dir_uri: str) -> DedupApplyStats:
    """Drop every clustered document that is not its cluster's survivor."""
    documents = storage.read_table(input_uri)
    if "id" not in documents.schema.names:
        raise DataError(f"{input_uri} has no 'id' column: not a documents table")
    documents = documents.select(DOCUMENT_SCHEMA.names).cast(DOCUMENT_SCHEMA)
    clusters = storage.read_table(clusters_uri, columns=["id", "survivor_id", "reason"])
    removed = clusters.filter(pc.not_equal(clusters["id"], clusters["survivor_id"]))

    position = pc.index_in(documents["id"], value_set=removed["id"])
    is_removed = pc.is_valid(position)
    kept = documents.filter(pc.invert(is_removed))
    dropped = documents.filter(is_removed)
    dropped_position = position.filter(is_removed)
    rejects = (
        dropped.append_column("stage", pa.array([STAGE] * dropped.num_rows, pa.string()))
        .append_column("reason", removed["reason"].take(dropped_position))
        .append_column("detail", removed["survivor_id"].take(dropped_position))
        .cast(REJECT_SCHEMA)
    )

    stats = DedupApplyStats(
        documents_in=documents.num_rows,
        kept=kept.num_rows,
        removed=dict(sorted(Counter(rejects["reason"].to_pylist()).items())),
        chars_in=_chars(documents),
        chars_kept=_chars(kept),
    )
    storage.write_table(kept, storage.join(output_dir_uri, "documents.parquet"))
    storage.write_table(rejects, storage.join(output_dir_uri, "rejects.parquet"))
    storage.write_json(
        {**asdict(stats), "input": input_uri, "clusters": clusters_uri},
        storage.join(output_dir_uri, "stats.json"),
    )
    return stats


def _chars(table: pa.Table) -> int:
    return int(pc.sum(table["num_chars"]).as_py() or 0)
