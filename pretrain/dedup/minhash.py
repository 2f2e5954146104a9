"""Vectorized MinHash signatures per shard, compatible with datasketch's ``affine32`` scheme.

For a batch of documents the shingle hashes (:mod:`pretrain.dedup.shingles`) go through the
permutations ``fmix32(h) * a + b  (mod 2^32)`` — exactly what
``datasketch.MinHash(num_perm, seed, scheme="affine32")`` computes, with its ``a, b`` — all at
once with numpy, reduced per document with ``np.minimum.reduceat``::

    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.minhash import compute_signatures
    stats = compute_signatures(
        ".pretrain/artifacts/filtered_shards/s0/documents.parquet",
        ".pretrain/artifacts/minhash_signatures/s0/signatures.parquet",
        DedupConfig(),
    )

Three files in the output folder:

- ``signatures.parquet``: ``id, source, quality_score, exact_hash, url_hash, band_0 ..
  band_{B-1}, minhash`` (all ``num_perm`` uint32 values); schema metadata records the
  parameters, the documents URI and a content fingerprint (incremental dedup compares it).
- ``buckets.parquet``: long ``(band, h, row)`` sorted by ``(band, h)`` with small row groups,
  so the clustering stage reads one band partition with row-group pruning. Band -1 holds exact
  text hashes, band -2 URL hashes; documents without shingles get no LSH rows.
- ``lines.parquet``: ``(h, row)`` sorted, one row per distinct line/paragraph of a document
  (only when line dedup is on).
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.dedup import lines
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.shingles import batch_shingles, text_hashes
from pretrain.errors import DataError
from pretrain.identity import file_identity

MAX_HASH = np.uint32(0xFFFFFFFF)
SHINGLES_PER_CHUNK = 1 << 12  # (4096 x num_perm) uint32 stays in cache: 2.5x faster than 1<<17
EXACT_BAND, URL_BAND = -1, -2
BUCKET_ROW_GROUP = 16_384  # small row groups: a band partition reads only its own ranges
# Text bytes shingled at once: books (1-5 MB each) pass without a size cap while a batch's
# token arrays stay bounded (~40 bytes per character at peak).
MAX_BATCH_BYTES = 1 << 24


@dataclass(frozen=True, kw_only=True)
class SignatureStats:
    documents: int
    shingles: int
    char_shingled: int  # documents shingled by characters (CJK/Thai)
    empty: int  # documents without a single shingle (linked by exact hash only)
    line_rows: int = 0  # distinct (document, line) pairs recorded for line dedup
    normalization: str = "v2"  # DedupConfig.normalization the shingles were computed with

    def as_metadata(self) -> dict[str, int | float | str]:
        return asdict(self)


def permutations(config: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's ``(a, b)`` for ``num_perm``/``seed`` (uint32, affine32 scheme)."""
    return _permutations(config.num_perm, config.seed)


@functools.cache
def _permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from datasketch import MinHash

    a, b = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
    return a.astype(np.uint32), b.astype(np.uint32)


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's finalizer on uint32 (datasketch pre-mixes hashes with it)."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def signatures(
    hashes: np.ndarray, owner: np.ndarray, num_docs: int, config: DedupConfig
) -> np.ndarray:
    """(documents, num_perm) uint32 MinHash matrix from flat shingle hashes sorted by owner."""
    a, b = permutations(config)
    out = np.full((num_docs, config.num_perm), MAX_HASH, dtype=np.uint32)
    mixed = fmix32(hashes.astype(np.uint32))
    for start in range(0, len(mixed), SHINGLES_PER_CHUNK):
        chunk = slice(start, start + SHINGLES_PER_CHUNK)
        permuted = np.multiply(mixed[chunk, None], a[None, :])  # wraps mod 2^32 on purpose
        permuted += b[None, :]
        docs = owner[chunk]
        starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
        minima = np.minimum.reduceat(permuted, starts, axis=0)
        # A document can straddle two chunks: merge its partial minima (owners are unique
        # within one chunk, so plain fancy indexing is safe and much faster than ufunc.at).
        owners = docs[starts]
        out[owners] = np.minimum(out[owners], minima)
    return out


def band_hashes(signature: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(documents, bands) uint64: one FNV-style hash of each band's ``rows`` values."""
    out = np.empty((signature.shape[0], bands), dtype=np.uint64)
    sig = signature.astype(np.uint64)
    for band in range(bands):
        h = np.full(signature.shape[0], 0xCBF29CE484222325 ^ band, dtype=np.uint64)
        for value in sig[:, band * rows : (band + 1) * rows].T:
            h = (h ^ value) * np.uint64(0x100000001B3)
        h = h ^ (h >> np.uint64(31))  # fold high bits down so every bit depends on all rows
        out[:, band] = h * np.uint64(0x94D049BB133111EB)
    return out


def url_hashes(urls: pa.Array, seed: int) -> pa.Array:
    """uint64 hash of each http(s) URL without fragment or trailing slash; null otherwise."""
    series = pl.Series("url", urls).cast(pl.String).str.strip_chars()
    web = series.str.contains(r"(?i)^https?://")
    key = series.str.replace(r"#.*$", "").str.strip_chars_end("/")
    hashed = key.hash(seed=seed + 7)
    return pa.array(hashed.to_numpy(), pa.uint64(), mask=~web.fill_null(False).to_numpy())


def compute_signatures(input_uri: str, output_uri: str, config: DedupConfig) -> SignatureStats:
    """Write signatures, buckets and line files for ``input_uri`` next to ``output_uri``."""
    bands, rows = config.band_rows
    meta_parts: list[pa.Table] = []
    matrices: list[np.ndarray] = []
    line_parts: list[np.ndarray] = []
    shingles_total = char_shingled = empty = 0
    offset = 0
    for batch in _char_bounded(storage.iter_table_batches(input_uri, batch_size=8192)):
        names = batch.schema.names
        if "text" not in names or "id" not in names:
            raise DataError(f"{input_uri} lacks 'id'/'text' columns: not a documents table")
        texts = batch.column("text")
        shingled = batch_shingles(_series(texts), config)
        char_shingled += int(shingled.char_shingled.sum())
        shingles_total += len(shingled.hashes)
        empty += int((shingled.counts == 0).sum())
        matrices.append(signatures(shingled.hashes, shingled.owner, batch.num_rows, config))
        nulls = pa.nulls(batch.num_rows)
        meta_parts.append(
            pa.table(
                {
                    "id": batch.column("id").cast(pa.string()),
                    "source": batch.column("source").cast(pa.string()),
                    "quality_score": _column(batch, "quality_score", nulls).cast(pa.float32()),
                    "exact_hash": pa.array(
                        text_hashes(_series(texts), config.seed, config.normalization), pa.uint64()
                    ),
                    "url_hash": url_hashes(_column(batch, "url", nulls), config.seed),
                    "empty": pa.array(shingled.counts == 0),
                }
            )
        )
        if config.lines.enabled:
            sources = _column(batch, "source", nulls).to_pylist()
            line_parts.append(lines.line_rows(texts, sources, config.lines, offset))
        offset += batch.num_rows
    meta = pa.concat_tables(meta_parts) if meta_parts else _empty_meta()
    matrix = np.concatenate(matrices) if matrices else np.empty((0, config.num_perm), np.uint32)
    banded = band_hashes(matrix, bands, rows)
    folder = output_uri.rsplit("/", 1)[0]
    write_parquet(_buckets_table(meta, banded), storage.join(folder, "buckets.parquet"))
    line_table = lines.rows_table(line_parts, config.lines)
    write_parquet(line_table, storage.join(folder, "lines.parquet"))
    table = _signature_table(meta.drop_columns(["empty"]), banded, matrix, config, input_uri)
    storage.write_table(table, output_uri)
    return SignatureStats(
        documents=meta.num_rows,
        shingles=shingles_total,
        char_shingled=char_shingled,
        empty=empty,
        line_rows=line_table.num_rows,
        normalization=config.normalization,
    )


def write_parquet(table: pa.Table, uri: str, row_group_size: int = BUCKET_ROW_GROUP) -> None:
    """Atomic Parquet write with small row groups (statistics let readers skip ranges)."""
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", row_group_size=row_group_size)
    storage.write_bytes(buf.getvalue(), uri)


def _char_bounded(
    batches: Iterator[pa.RecordBatch], max_bytes: int = MAX_BATCH_BYTES
) -> Iterator[pa.RecordBatch]:
    """Split record batches so each holds at most ``max_bytes`` of text (at least one row)."""
    for batch in batches:
        if "text" not in batch.schema.names:
            yield batch
            continue
        sizes = pc.binary_length(batch.column("text").cast(pa.string())).fill_null(0)
        ends = np.cumsum(sizes.to_numpy(zero_copy_only=False).astype(np.int64))
        start = 0
        while start < batch.num_rows:
            base = ends[start - 1] if start else 0
            end = max(start + 1, int(np.searchsorted(ends, base + max_bytes, side="right")))
            yield batch.slice(start, end - start)
            start = end


def _series(texts: pa.ChunkedArray | pa.Array) -> pl.Series:
    return pl.Series("text", texts.cast(pa.string()))


def _column(batch: pa.RecordBatch, name: str, default: pa.Array) -> pa.Array:
    return batch.column(name) if name in batch.schema.names else default


def _empty_meta() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([], pa.string()),
            "source": pa.array([], pa.string()),
            "quality_score": pa.array([], pa.float32()),
            "exact_hash": pa.array([], pa.uint64()),
            "url_hash": pa.array([], pa.uint64()),
            "empty": pa.array([], pa.bool_()),
        }
    )


def _buckets_table(meta: pa.Table, banded: np.ndarray) -> pa.Table:
    """Long ``(band, h, row)`` table sorted by ``(band, h, row)``."""
    num_docs, bands = banded.shape
    rows = np.arange(num_docs, dtype=np.uint32)
    has_shingles = ~meta.column("empty").to_numpy(zero_copy_only=False).astype(bool)
    url = meta.column("url_hash")
    url_valid = url.is_valid().to_numpy(zero_copy_only=False).astype(bool)
    band_ids = [np.full(num_docs, EXACT_BAND, np.int16)]
    hashes = [meta.column("exact_hash").to_numpy()]
    row_ids = [rows]
    band_ids.append(np.full(int(url_valid.sum()), URL_BAND, np.int16))
    hashes.append(url.filter(url.is_valid()).to_numpy())
    row_ids.append(rows[url_valid])
    for band in range(bands):
        band_ids.append(np.full(int(has_shingles.sum()), band, np.int16))
        hashes.append(banded[has_shingles, band])
        row_ids.append(rows[has_shingles])
    band_col, h_col, row_col = (np.concatenate(x) for x in (band_ids, hashes, row_ids))
    order = np.lexsort((row_col, h_col, band_col))
    return pa.table(
        {
            "band": pa.array(band_col[order], pa.int16()),
            "h": pa.array(h_col[order].astype(np.uint64), pa.uint64()),
            "row": pa.array(row_col[order], pa.uint32()),
        }
    )


def _signature_table(
    meta: pa.Table, banded: np.ndarray, matrix: np.ndarray, config: DedupConfig, input_uri: str
) -> pa.Table:
    arrays = {name: meta.column(name) for name in meta.column_names}
    for band in range(banded.shape[1]):
        arrays[f"band_{band}"] = pa.array(banded[:, band], pa.uint64())
    flat = pa.array(matrix.reshape(-1), pa.uint32())
    offsets = pa.array(np.arange(0, matrix.size + 1, config.num_perm, dtype=np.int32))
    arrays["minhash"] = pa.ListArray.from_arrays(offsets, flat)
    table = pa.table(arrays)
    fingerprint = hashlib.blake2b(digest_size=16)
    keys = pl.from_arrow(table.select(["id", "exact_hash", "url_hash"]))
    assert isinstance(keys, pl.DataFrame)
    fingerprint.update(keys.hash_rows(seed=0).to_numpy().tobytes())
    fingerprint.update(matrix.tobytes())
    metadata = {f"dedup.{k}": v for k, v in config.signature_params().items()}
    metadata["dedup.documents_uri"] = input_uri
    metadata["dedup.documents_identity"] = file_identity(input_uri)  # see pretrain.identity
    metadata["dedup.fingerprint"] = fingerprint.hexdigest()
    return table.replace_schema_metadata(metadata)
