"""Global duplicate clusters from every shard's signatures: exact groups plus MinHash LSH.

1. Exact: documents with the same ``exact_hash`` (normalized text) are linked.
2. LSH: for each band, a polars group-by on the band hash gives buckets; members of a bucket
   become candidate pairs (all pairs, or star pairs to the first member in buckets larger
   than ``max_bucket_pairs``); with ``verify`` a pair is kept only when the two full
   signatures agree on at least ``threshold`` of their values (estimated Jaccard).
3. Union-find over all links → connected components. The survivor of each cluster is the
   highest ``quality_score`` (null counts lowest), then the smallest ``id`` — independent of
   shard order, so reruns give byte-identical output::

    from pretrain.dedup.clusters import cluster_duplicates
    stats = cluster_duplicates(signature_uris, ".pretrain/artifacts/dedup_clusters", DedupConfig())

``clusters.parquet`` holds only documents in clusters of size > 1: ``id, cluster_id,
survivor_id, reason`` with reason ``survivor``, ``exact_duplicate`` (same normalized text as
the survivor) or ``near_duplicate``. ``stats.json`` has the counts and a size histogram.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from pretrain import storage
from pretrain.dedup.config import DedupConfig
from pretrain.errors import DataError

CLUSTER_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("cluster_id", pa.int64()),
        ("survivor_id", pa.string()),
        ("reason", pa.string()),
    ]
)
_VERIFY_CHUNK = 65_536


@dataclass(frozen=True, kw_only=True)
class ClusterStats:
    documents: int
    clusters: int
    clustered_documents: int
    removed_exact: int
    removed_near: int
    candidate_pairs: int
    verified_pairs: int
    repeated_ids: int  # ids seen in more than one row (same file in two shards); merged
    cluster_sizes: dict[int, int] = field(default_factory=dict)

    @property
    def removed(self) -> int:
        return self.removed_exact + self.removed_near

    def as_metadata(self) -> dict[str, int | float | str]:
        out = {k: v for k, v in asdict(self).items() if k != "cluster_sizes"}
        out["removed"] = self.removed
        out["dedup_rate"] = round(self.removed / self.documents, 6) if self.documents else 0.0
        out["max_cluster_size"] = max(self.cluster_sizes, default=0)
        out["cluster_sizes"] = json.dumps({str(k): v for k, v in self.cluster_sizes.items()})
        return out


def cluster_duplicates(
    signature_uris: list[str], output_dir_uri: str, config: DedupConfig
) -> ClusterStats:
    """Cluster duplicates across all signature files; write clusters.parquet and stats.json."""
    table = _read_signatures(signature_uris, config)
    bands, _ = config.band_rows
    frame = pl.from_arrow(table.drop_columns(["minhash"]))
    assert isinstance(frame, pl.DataFrame)
    # One node per distinct id: a raw file listed in two shards gives the same id twice.
    frame = frame.with_row_index("row").unique("id", keep="first", maintain_order=True)
    repeated_ids = table.num_rows - frame.height
    frame = frame.with_row_index("node")
    signature = _signature_matrix(table)[frame["row"].to_numpy()]

    exact = _exact_edges(frame)
    candidates = _candidate_edges(frame, bands, config.max_bucket_pairs)
    near = _verify(candidates, signature, config) if config.verify else candidates
    roots = _connected_components(frame.height, np.concatenate([exact, near]))
    clusters = _assign_survivors(frame, roots)

    sizes = Counter(clusters.group_by("cluster_id").len()["len"].to_list())
    reasons = Counter(clusters["reason"].to_list())
    stats = ClusterStats(
        documents=frame.height,
        clusters=clusters["cluster_id"].n_unique() if clusters.height else 0,
        clustered_documents=clusters.height,
        removed_exact=reasons.get("exact_duplicate", 0),
        removed_near=reasons.get("near_duplicate", 0),
        candidate_pairs=len(candidates),
        verified_pairs=len(near),
        repeated_ids=repeated_ids,
        cluster_sizes=dict(sorted(sizes.items())),
    )
    out = clusters.to_arrow().select(CLUSTER_SCHEMA.names).cast(CLUSTER_SCHEMA)
    storage.write_table(out, storage.join(output_dir_uri, "clusters.parquet"))
    storage.write_json(
        {**stats.as_metadata(), "inputs": list(signature_uris), "config": asdict(config)},
        storage.join(output_dir_uri, "stats.json"),
    )
    return stats


def _read_signatures(uris: list[str], config: DedupConfig) -> pa.Table:
    if not uris:
        raise DataError("no signature files given: materialize minhash_signatures first")
    expected = {f"dedup.{k}": v for k, v in config.signature_params().items()}
    tables = []
    for uri in uris:
        table = storage.read_table(uri)
        found = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        wrong = {k: (found.get(k), v) for k, v in expected.items() if found.get(k) != v}
        if wrong:
            raise DataError(
                f"{uri} was computed with other dedup parameters {wrong} (found, expected): "
                "recompute its signatures with this DedupConfig"
            )
        tables.append(table.replace_schema_metadata(None))
    return pa.concat_tables(tables)


def _signature_matrix(table: pa.Table) -> np.ndarray:
    column = table.column("minhash").combine_chunks()
    values = column.flatten().to_numpy()
    return values.reshape(table.num_rows, -1) if table.num_rows else values.reshape(0, 1)


def _exact_edges(frame: pl.DataFrame) -> np.ndarray:
    edges = (
        frame.select("node", "exact_hash")
        .with_columns(pl.col("node").min().over("exact_hash").alias("first"))
        .filter(pl.col("node") != pl.col("first"))
    )
    return edges.select("first", "node").to_numpy().astype(np.int64).reshape(-1, 2)


def _candidate_edges(frame: pl.DataFrame, bands: int, max_bucket_pairs: int) -> np.ndarray:
    long = pl.concat(
        [
            frame.select(
                pl.lit(band, pl.Int32).alias("band"), pl.col(f"band_{band}").alias("h"), "node"
            )
            for band in range(bands)
        ]
    )
    members = long.with_columns(
        pl.len().over("band", "h").alias("size"),
        pl.col("node").min().over("band", "h").alias("first"),
    ).filter(pl.col("size") > 1)
    small = members.filter(pl.col("size") <= max_bucket_pairs).select("band", "h", "node")
    all_pairs = (
        small.join(small, on=["band", "h"], suffix="_b")
        .filter(pl.col("node") < pl.col("node_b"))
        .select(pl.col("node").alias("a"), pl.col("node_b").alias("b"))
    )
    star_pairs = members.filter(
        (pl.col("size") > max_bucket_pairs) & (pl.col("node") != pl.col("first"))
    ).select(pl.col("first").alias("a"), pl.col("node").alias("b"))
    pairs = pl.concat([all_pairs, star_pairs]).unique().sort("a", "b")
    return pairs.to_numpy().astype(np.int64).reshape(-1, 2)


def _verify(pairs: np.ndarray, signature: np.ndarray, config: DedupConfig) -> np.ndarray:
    keep = np.zeros(len(pairs), dtype=bool)
    for start in range(0, len(pairs), _VERIFY_CHUNK):
        chunk = pairs[start : start + _VERIFY_CHUNK]
        agreement = (signature[chunk[:, 0]] == signature[chunk[:, 1]]).mean(axis=1)
        keep[start : start + _VERIFY_CHUNK] = agreement >= config.threshold
    return pairs[keep]


def _connected_components(num_nodes: int, edges: np.ndarray) -> np.ndarray:
    """Union-find (path halving, smaller root wins) → root node of each node."""
    parent = np.arange(num_nodes)
    for a, b in edges.tolist():
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([_find(parent, node) for node in range(num_nodes)], dtype=np.int64)


def _find(parent: np.ndarray, node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return int(node)


def _assign_survivors(frame: pl.DataFrame, roots: np.ndarray) -> pl.DataFrame:
    grouped = (
        frame.select("id", "quality_score", "exact_hash")
        .with_columns(pl.Series("root", roots))
        .filter(pl.len().over("root") > 1)
        .sort(
            ["root", "quality_score", "id"],
            descending=[False, True, False],
            nulls_last=True,
        )
        .with_columns(
            pl.col("id").first().over("root").alias("survivor_id"),
            pl.col("exact_hash").first().over("root").alias("survivor_hash"),
        )
    )
    order = grouped.select("survivor_id").unique().sort("survivor_id").with_row_index("cluster_id")
    return (
        grouped.join(order, on="survivor_id")
        .with_columns(
            pl.when(pl.col("id") == pl.col("survivor_id"))
            .then(pl.lit("survivor"))
            .when(pl.col("exact_hash") == pl.col("survivor_hash"))
            .then(pl.lit("exact_duplicate"))
            .otherwise(pl.lit("near_duplicate"))
            .alias("reason"),
            pl.col("cluster_id").cast(pl.Int64),
        )
        .sort("cluster_id", "id")
        .select("id", "cluster_id", "survivor_id", "reason")
    )
