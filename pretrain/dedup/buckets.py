"""Candidate pairs from band buckets, one band partition at a time (bounded memory).

Every shard's ``buckets.parquet`` is sorted by ``(band, h)`` with small row groups. A *band
partition* is one band and one slice of the 64-bit hash range; its rows are read from every
shard with row-group pruning, grouped by hash with polars, and turned into pairs. The number
of hash slices grows with the corpus (``ceil(documents / max_partition_rows)``), so the rows
held at once stay near ``max_partition_rows`` whatever the corpus size::

    from pretrain.dedup.buckets import ShardInput, candidate_pairs
    shards = [ShardInput(uri=u, offset=o, num_rows=n) for u, o, n in ...]
    found = candidate_pairs(shards, config)
    found.exact          # (k, 2) node pairs with the same text or URL (no check needed)
    found.lsh            # (k, 2) node pairs sharing an LSH band bucket (to verify)

Band -1 pairs equal exact text hashes, band -2 equal URLs (star pairs to the smallest node);
LSH bands give all pairs of a bucket, or star pairs in buckets above ``max_bucket_pairs``.
In incremental mode ``eligible`` drops documents removed earlier and ``is_fresh`` drops
pairs whose both ends were decided earlier.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.lines import hash_range_filter
from pretrain.dedup.minhash import EXACT_BAND, URL_BAND

NodeMask = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ShardInput:
    uri: str  # signatures.parquet; buckets.parquet and lines.parquet sit next to it
    offset: int  # node number of the shard's first row
    num_rows: int

    def sibling(self, name: str) -> str:
        return storage.join(self.uri.rsplit("/", 1)[0], name)


@dataclass(frozen=True)
class Candidates:
    exact: np.ndarray  # (k, 2) int64, a < b
    lsh: np.ndarray  # (k, 2) int64, a < b, not already in ``exact``
    partitions: int
    peak_partition_rows: int


def hash_partitions(num_documents: int, config: DedupConfig) -> int:
    return max(1, math.ceil(num_documents / config.max_partition_rows))


def candidate_pairs(
    shards: list[ShardInput],
    config: DedupConfig,
    *,
    eligible: NodeMask | None = None,
    is_fresh: NodeMask | None = None,
) -> Candidates:
    """Exact/URL and LSH candidate pairs over every band partition (see module docstring)."""
    bands, _ = config.band_rows
    parts = hash_partitions(sum(s.num_rows for s in shards), config)
    key_bands = [EXACT_BAND] + ([URL_BAND] if config.url_dedup else [])
    exact: list[np.ndarray] = []
    lsh: list[np.ndarray] = []
    peak = 0
    for band in [*key_bands, *range(bands)]:
        for part in range(parts):
            pairs, rows = partition_pairs(
                shards, band, hash_range_filter(part, parts), config,
                eligible=eligible, is_fresh=is_fresh,
            )  # fmt: skip
            peak = max(peak, rows)
            (exact if band < 0 else lsh).append(pairs)
    exact_pairs = unique_pairs(exact)
    lsh_pairs = unique_pairs(lsh)
    if len(exact_pairs) and len(lsh_pairs):
        lsh_pairs = lsh_pairs[~rows_in(lsh_pairs, exact_pairs)]
    return Candidates(
        exact=exact_pairs, lsh=lsh_pairs, partitions=parts * (len(key_bands) + bands),
        peak_partition_rows=peak,
    )  # fmt: skip


def partition_pairs(
    shards: list[ShardInput],
    band: int,
    hash_slice: pc.Expression,
    config: DedupConfig,
    *,
    eligible: NodeMask | None = None,
    is_fresh: NodeMask | None = None,
) -> tuple[np.ndarray, int]:
    """Pairs of one band partition (its rows of ``band`` in ``hash_slice``, a
    :func:`~pretrain.dedup.lines.hash_range_filter`) and its bucket rows.

    A bucket never spans two slices, so the union over any slicing is the same set of pairs.
    """
    members = _partition_members(shards, band, hash_slice, eligible)
    pairs = _star_pairs(members) if band < 0 else bucket_pairs(members, config.max_bucket_pairs)
    if is_fresh is not None and len(pairs):
        pairs = pairs[is_fresh(pairs[:, 0]) | is_fresh(pairs[:, 1])]
    return pairs, members.height


def _partition_members(
    shards: list[ShardInput], band: int, hash_slice: pc.Expression, eligible: NodeMask | None
) -> pl.DataFrame:
    frames = []
    for shard in shards:
        fs, path = storage.filesystem(shard.sibling("buckets.parquet"))
        filters = (pc.field("band") == pa.scalar(band, pa.int16())) & hash_slice
        table = pq.read_table(path, filesystem=fs, columns=["h", "row"], filters=filters)
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        frames.append(
            frame.select("h", (pl.col("row").cast(pl.Int64) + shard.offset).alias("node"))
        )
    members = (
        pl.concat(frames) if frames else pl.DataFrame(schema={"h": pl.UInt64, "node": pl.Int64})
    )
    if eligible is not None and members.height:
        members = members.filter(pl.Series(eligible(members["node"].to_numpy())))
    return members


def bucket_pairs(members: pl.DataFrame, max_bucket_pairs: int) -> np.ndarray:
    """Pairs of one band partition's ``(h, node)`` rows: all pairs per bucket, or a star."""
    sized = members.with_columns(
        pl.len().over("h").alias("size"), pl.col("node").min().over("h").alias("first")
    ).filter(pl.col("size") > 1)
    small = sized.filter(pl.col("size") <= max_bucket_pairs).select("h", "node")
    all_pairs = (
        small.join(small, on="h", suffix="_b")
        .filter(pl.col("node") < pl.col("node_b"))
        .select(pl.col("node").alias("a"), pl.col("node_b").alias("b"))
    )
    star = sized.filter((pl.col("size") > max_bucket_pairs) & (pl.col("node") != pl.col("first")))
    star_pairs = star.select(pl.col("first").alias("a"), pl.col("node").alias("b"))
    return pl.concat([all_pairs, star_pairs]).to_numpy().astype(np.int64).reshape(-1, 2)


def _star_pairs(members: pl.DataFrame) -> np.ndarray:
    star = members.with_columns(pl.col("node").min().over("h").alias("first")).filter(
        pl.col("node") != pl.col("first")
    )
    pairs = star.select(pl.col("first").alias("a"), pl.col("node").alias("b"))
    return pairs.to_numpy().astype(np.int64).reshape(-1, 2)


def unique_pairs(parts: list[np.ndarray]) -> np.ndarray:
    pairs = np.concatenate(parts) if parts else np.empty((0, 2), np.int64)
    return np.unique(pairs.reshape(-1, 2), axis=0) if len(pairs) else pairs.reshape(0, 2)


def rows_in(pairs: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Boolean mask: which rows of ``pairs`` also appear in ``reference`` (both sorted)."""

    def key(p: np.ndarray) -> np.ndarray:
        return p[:, 0].astype(np.uint64) << np.uint64(32) | p[:, 1].astype(np.uint64)

    return np.isin(key(pairs), key(reference))
