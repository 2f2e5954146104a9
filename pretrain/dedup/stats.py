"""What the clustering stage reports: counts, duplicate rate per source, cluster-size chart.

``ClusterStats.as_metadata()`` is flat (numbers and strings) for Dagster metadata and
``stats.json``; ``cluster_sizes_md`` is a Markdown bar chart (the Dagster layer shows keys
ending in ``_md`` as Markdown)::

    stats = cluster_duplicates(uris, out, DedupConfig())
    print(stats.as_metadata()["cluster_sizes_md"])
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow.parquet as pq

from pretrain import storage

if TYPE_CHECKING:
    from pretrain.dedup.buckets import ShardInput

_BAR = 40


@dataclass(frozen=True, kw_only=True)
class ClusterStats:
    documents: int
    clusters: int
    clustered_documents: int
    removed_exact: int
    removed_url: int
    removed_near: int
    candidate_pairs: int  # LSH pairs that needed a check
    verified_pairs: int  # LSH pairs that passed it
    exact_pairs: int  # same text or URL: no check needed
    repeated_ids: int  # ids seen in more than one row (same file in two shards); merged
    partitions: int  # band partitions read one at a time
    peak_partition_rows: int  # most bucket rows held at once
    peak_rss_mb: float  # process peak resident memory when the stage finished
    committed_shards: int  # incremental: shards whose earlier decisions were kept
    fresh_shards: int  # shards decided in this run
    survivor_changes: int  # documents of earlier shards whose outcome changed
    boilerplate_units: int  # lines/paragraphs marked as boilerplate
    seconds: float
    normalization: str = "v2"  # DedupConfig.normalization of shingles and exact keys
    containment_pairs: int = 0  # LSH pairs listed in containment.parquet (not removed)
    cluster_sizes: dict[int, int] = field(default_factory=dict)
    rate_by_source: dict[str, float] = field(default_factory=dict)

    @property
    def removed(self) -> int:
        return self.removed_exact + self.removed_url + self.removed_near

    @classmethod
    def from_rows(cls, rows: pl.DataFrame, **counts: Any) -> ClusterStats:
        sizes = Counter(rows.group_by("cluster_id").len()["len"].to_list())
        reasons = Counter(rows["reason"].to_list())
        return cls(
            clusters=rows["cluster_id"].n_unique() if rows.height else 0,
            clustered_documents=rows.height,
            removed_exact=reasons.get("exact_duplicate", 0),
            removed_url=reasons.get("url_duplicate", 0),
            removed_near=reasons.get("near_duplicate", 0),
            cluster_sizes=dict(sorted(sizes.items())),
            **counts,
        )

    def as_metadata(self) -> dict[str, int | float | str]:
        skip = ("cluster_sizes", "rate_by_source")
        out: dict[str, Any] = {k: v for k, v in asdict(self).items() if k not in skip}
        out["removed"] = self.removed
        out["dedup_rate"] = round(self.removed / self.documents, 6) if self.documents else 0.0
        out["max_cluster_size"] = max(self.cluster_sizes, default=0)
        out["cluster_sizes"] = json.dumps({str(k): v for k, v in self.cluster_sizes.items()})
        out["duplicate_rate_by_source"] = json.dumps(self.rate_by_source, sort_keys=True)
        out["cluster_sizes_md"] = histogram_markdown(self.cluster_sizes)
        return out


def histogram_markdown(sizes: dict[int, int]) -> str:
    """Cluster-size histogram as a Markdown table with text bars (log2 size buckets)."""
    if not sizes:
        return "No duplicate clusters."
    buckets: Counter[str] = Counter()
    for size, count in sizes.items():
        low = 1 << (size.bit_length() - 1)
        label = str(low) if low * 2 - 1 == low else f"{low}-{low * 2 - 1}"
        buckets[label] += count
    order = sorted(buckets, key=lambda label: int(label.split("-")[0]))
    top = max(buckets.values())
    lines = ["| cluster size | clusters | |", "|---:|---:|---|"]
    for label in order:
        bar = "█" * max(1, round(_BAR * buckets[label] / top))
        lines.append(f"| {label} | {buckets[label]} | {bar} |")
    return "\n".join(lines)


def source_rates(rows: pl.DataFrame, shards: list[ShardInput]) -> dict[str, float]:
    """Removed documents / documents, per source (source column streamed per row group)."""
    totals: Counter[str] = Counter()
    for shard in shards:
        fs, path = storage.filesystem(shard.uri)
        with fs.open_input_file(path) as f:
            for batch in pq.ParquetFile(f).iter_batches(columns=["source"], use_threads=False):
                counts = pl.Series("source", batch.column(0)).cast(pl.String).value_counts()
                for value, count in counts.iter_rows():
                    totals[str(value)] += int(count)
    removed = Counter(rows.filter(pl.col("reason") != "survivor")["source"].to_list())
    return {s: round(removed.get(s, 0) / n, 6) for s, n in sorted(totals.items()) if n}
