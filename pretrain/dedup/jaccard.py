"""Verification of LSH candidate pairs, in chunks of bounded memory.

With ``verify="jaccard"`` a pair counts only when the true shingle Jaccard of its two texts
is ``>= threshold`` (and a failing pair whose smaller document shares ``>= containment_threshold``
of its shingles with the other is listed as containment); ``"signature"`` uses the share of
equal MinHash values instead. Pairs are checked in slices of at most ``max_partition_rows``
documents, whose texts are read from the row groups that hold them only::

    from pretrain.dedup.jaccard import verify_pairs
    kept, contained = verify_pairs(candidates, shards, DedupConfig())
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.dedup.buckets import ShardInput
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.shingles import ShingleBatch, batch_shingles, intersections

VERIFY_BATCH_ROWS = 1024  # texts shingled at once during Jaccard verification


def verify_pairs(
    pairs: np.ndarray, shards: list[ShardInput], config: DedupConfig
) -> tuple[np.ndarray, np.ndarray]:
    """LSH pairs that pass the check, in their order, and the containment rows (see
    :func:`find_pairs`); nodes are read in bounded chunks."""
    no_containment = np.empty((0, 3), np.float64)
    if config.verify == "none" or len(pairs) == 0:
        return pairs, no_containment
    documents = {s.uri: documents_uri(s) for s in shards} if config.verify == "jaccard" else {}
    kept, contained = [], [no_containment]
    for chunk in pair_chunks(pairs, config.max_partition_rows):
        jaccard, sizes, inter = _chunk_scores(chunk, shards, config, documents)
        near = jaccard >= config.threshold
        kept.append(chunk[near])
        if config.containment_threshold > 0 and inter is not None:
            smaller = sizes.argmin(axis=1)  # 0: left is the smaller document
            share = inter / np.maximum(sizes.min(axis=1), 1)
            hit = ~near & (share >= config.containment_threshold)
            inner = chunk[hit, smaller[hit]]
            outer = chunk[hit, 1 - smaller[hit]]
            contained.append(np.column_stack([inner, outer, share[hit]]).astype(np.float64))
    return np.concatenate(kept), np.concatenate(contained)


def pair_chunks(pairs: np.ndarray, max_nodes: int) -> Iterator[np.ndarray]:
    """Consecutive slices of ``pairs`` with at most ``max_nodes`` distinct nodes each.

    Verification holds one slice's texts (or signatures) at a time, so its memory follows
    ``max_partition_rows`` like the band partitions do, not the number of candidates.
    """
    max_nodes = max(2, max_nodes)
    start = 0
    while start < len(pairs):
        window = pairs[start : start + 4 * max_nodes]
        _, first = np.unique(window.reshape(-1), return_index=True)
        introduced = np.sort(first // 2)  # pair at which each distinct node first shows up
        end = int(introduced[max_nodes]) if len(introduced) > max_nodes else len(window)
        end = start + max(1, end)
        yield pairs[start:end]
        start = end


def _chunk_scores(
    pairs: np.ndarray, shards: list[ShardInput], config: DedupConfig, documents: dict[str, str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Jaccard (true, or estimated from signatures) of each pair of one chunk; with true
    Jaccard also the shingle counts ``(k, 2)`` and the shared shingles of each pair."""
    nodes = np.unique(pairs)
    left, right = np.searchsorted(nodes, pairs[:, 0]), np.searchsorted(nodes, pairs[:, 1])
    if config.verify == "signature":
        parts = [
            np.stack(table.column("minhash").to_numpy(zero_copy_only=False))
            for shard, _, rows in per_shard(shards, nodes)
            for _, table in read_rows(shard.uri, rows, ["minhash"])
        ]
        signature = np.concatenate(parts)
        return (signature[left] == signature[right]).mean(axis=1), np.empty((0, 2)), None
    batches = [
        batch_shingles(pl.Series("text", table.column("text")).cast(pl.String), config)
        for shard, _, rows in per_shard(shards, nodes)
        for _, table in read_rows(documents[shard.uri], rows, ["text"], VERIFY_BATCH_ROWS)
    ]
    batch = ShingleBatch.concat(batches)
    inter = intersections(batch, left, right)
    sizes = np.column_stack([batch.counts[left], batch.counts[right]])
    union = sizes.sum(axis=1) - inter
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0), sizes, inter


def documents_uri(shard: ShardInput) -> str:
    """The documents file a signature file was computed from (its footer metadata)."""
    fs, path = storage.filesystem(shard.uri)
    with fs.open_input_file(path) as f:
        meta = pq.ParquetFile(f).schema_arrow.metadata or {}
    return meta[b"dedup.documents_uri"].decode()


def read_rows(
    uri: str, rows: np.ndarray, columns: list[str], batch_rows: int | None = None
) -> Iterator[tuple[np.ndarray, pa.Table]]:
    """``(rows, table)`` for the sorted ``rows`` of a Parquet file, in order, reading only
    the row groups that hold them, one at a time (at most ``batch_rows`` rows per table)."""
    fs, path = storage.filesystem(uri)
    with fs.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        start = 0
        for group in range(parquet.num_row_groups):
            end = start + parquet.metadata.row_group(group).num_rows
            lo, hi = np.searchsorted(rows, [start, end])
            if hi > lo:
                table = parquet.read_row_group(group, columns=columns, use_threads=False)
                step = batch_rows or hi - lo
                for at in range(lo, hi, step):
                    wanted = rows[at : min(at + step, hi)]
                    yield wanted, table.take(pa.array(wanted - start))
                del table
                pa.default_memory_pool().release_unused()  # else mimalloc keeps each group
            start = end


def per_shard(
    shards: list[ShardInput], nodes: np.ndarray
) -> Iterator[tuple[ShardInput, np.ndarray, np.ndarray]]:
    """Yield ``(shard, positions in nodes, rows in shard)`` for sorted ``nodes``."""
    for shard in shards:
        lo, hi = np.searchsorted(nodes, [shard.offset, shard.offset + shard.num_rows])
        if hi > lo:
            yield shard, np.arange(lo, hi), nodes[lo:hi] - shard.offset
