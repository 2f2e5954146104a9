"""Vectorized MinHash signatures, compatible with datasketch's ``affine32`` scheme.

Each document is normalized (lowercase, collapsed whitespace), cut into word 5-gram shingles
(character n-grams for CJK/Thai text), and each shingle becomes a 32-bit hash. For a batch of
documents the permutations ``fmix32(h) * a + b  (mod 2^32)`` — exactly what
``datasketch.MinHash(num_perm, seed, scheme="affine32")`` computes, with its ``a, b`` — run over
all shingles at once with numpy and are reduced per document with ``np.minimum.reduceat``::

    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.minhash import compute_signatures
    stats = compute_signatures(
        ".pretrain/artifacts/filtered_shards/s0/documents.parquet",
        ".pretrain/artifacts/minhash_signatures/s0/signatures.parquet",
        DedupConfig(),
    )

Output columns: ``id, source, quality_score, exact_hash`` (uint64 of the normalized text),
``band_0 .. band_{B-1}`` (uint64 band hashes) and ``minhash`` (all ``num_perm`` uint32 values,
for candidate verification). The Parquet schema metadata records the signature parameters.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa

from pretrain import storage
from pretrain.dedup.config import DedupConfig
from pretrain.errors import DataError

MAX_HASH = np.uint32(0xFFFFFFFF)
SHINGLES_PER_CHUNK = 1 << 17  # bounds the (shingles x num_perm) matrix to ~60 MB
_CJK = re.compile(
    r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)
# Odd 64-bit multipliers that give each n-gram position its own weight.
_POSITION_MULTIPLIERS = np.array(
    [((0x9E3779B97F4A7C15 ^ (i * 0xBF58476D1CE4E5B9)) & 0xFFFFFFFFFFFFFFFF) | 1 for i in range(64)],
    dtype=np.uint64,
)


@dataclass(frozen=True, kw_only=True)
class SignatureStats:
    documents: int
    shingles: int
    char_shingled: int  # documents shingled by characters (CJK/Thai)
    empty: int  # documents without a single shingle (signature is all 0xFFFFFFFF)

    def as_metadata(self) -> dict[str, int | float | str]:
        return asdict(self)


def normalize_for_hash(text: str) -> str:
    return " ".join(text.lower().split())


def exact_hash(normalized: str) -> int:
    digest = hashlib.blake2b(normalized.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


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


def shingle_hashes(text: str, config: DedupConfig, vocab: dict[str, int]) -> np.ndarray:
    """Unique uint32 shingle hashes of one text (``vocab`` caches token hashes)."""
    normalized = normalize_for_hash(text)
    if _is_cjk(normalized, config):
        tokens, n = list(normalized.replace(" ", "")), config.char_ngram
    else:
        tokens, n = normalized.split(), config.ngram
    if not tokens:
        return np.empty(0, dtype=np.uint32)
    ids = np.fromiter((_token_hash(t, vocab) for t in tokens), dtype=np.uint64, count=len(tokens))
    n = min(n, len(ids))  # a short text is one shingle of all its tokens
    width = len(ids) - n + 1
    combined = np.zeros(width, dtype=np.uint64)
    for k in range(n):
        combined = combined * _POSITION_MULTIPLIERS[k % 64] + ids[k : k + width]
    folded = (combined ^ (combined >> np.uint64(32))).astype(np.uint32)
    return np.unique(folded)


def _is_cjk(normalized: str, config: DedupConfig) -> bool:
    letters = len(normalized) - normalized.count(" ")
    return letters > 0 and len(_CJK.findall(normalized)) >= config.cjk_fraction * letters


def _token_hash(token: str, vocab: dict[str, int]) -> int:
    value = vocab.get(token)
    if value is None:
        digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        value = vocab[token] = int.from_bytes(digest, "little")
    return value


def signatures(shingles: list[np.ndarray], config: DedupConfig) -> np.ndarray:
    """(documents, num_perm) uint32 MinHash matrix for per-document shingle hash arrays."""
    a, b = permutations(config)
    out = np.full((len(shingles), config.num_perm), MAX_HASH, dtype=np.uint32)
    counts = np.array([len(s) for s in shingles], dtype=np.int64)
    if counts.sum() == 0:
        return out
    hashes = fmix32(np.concatenate(shingles).astype(np.uint32))
    owner = np.repeat(np.arange(len(shingles)), counts)
    for start in range(0, len(hashes), SHINGLES_PER_CHUNK):
        chunk = slice(start, start + SHINGLES_PER_CHUNK)
        permuted = hashes[chunk, None] * a[None, :] + b[None, :]  # wraps mod 2^32 on purpose
        docs = owner[chunk]
        starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
        minima = np.minimum.reduceat(permuted, starts, axis=0)
        # A document can straddle two chunks: merge its partial minima.
        np.minimum.at(out, docs[starts], minima)
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


def compute_signatures(input_uri: str, output_uri: str, config: DedupConfig) -> SignatureStats:
    """Write the signatures Parquet (one row per document of ``input_uri``) to ``output_uri``."""
    bands, rows = config.band_rows
    columns: dict[str, list] = {"id": [], "source": [], "quality_score": [], "exact_hash": []}
    parts: list[np.ndarray] = []
    shingles_total = char_shingled = empty = 0
    vocab: dict[str, int] = {}
    for batch in storage.iter_table_batches(input_uri, batch_size=4096):
        if "text" not in batch.schema.names or "id" not in batch.schema.names:
            raise DataError(f"{input_uri} lacks 'id'/'text' columns: not a documents table")
        texts = batch.column("text").to_pylist()
        shingles = [shingle_hashes(t or "", config, vocab) for t in texts]
        char_shingled += sum(_is_cjk(normalize_for_hash(t or ""), config) for t in texts)
        shingles_total += sum(len(s) for s in shingles)
        empty += sum(len(s) == 0 for s in shingles)
        parts.append(signatures(shingles, config))
        columns["id"] += batch.column("id").to_pylist()
        columns["source"] += batch.column("source").to_pylist()
        if "quality_score" in batch.schema.names:
            columns["quality_score"] += batch.column("quality_score").to_pylist()
        else:
            columns["quality_score"] += [None] * len(texts)
        columns["exact_hash"] += [exact_hash(normalize_for_hash(t or "")) for t in texts]
        if len(vocab) > 2_000_000:
            vocab.clear()  # bound memory on huge shards; hashes do not depend on the cache
    matrix = np.concatenate(parts) if parts else np.empty((0, config.num_perm), np.uint32)
    storage.write_table(_signature_table(columns, matrix, config, bands, rows), output_uri)
    return SignatureStats(
        documents=len(columns["id"]),
        shingles=shingles_total,
        char_shingled=char_shingled,
        empty=empty,
    )


def _signature_table(
    columns: dict[str, list], matrix: np.ndarray, config: DedupConfig, bands: int, rows: int
) -> pa.Table:
    banded = band_hashes(matrix, bands, rows)
    arrays = {
        "id": pa.array(columns["id"], pa.string()),
        "source": pa.array(columns["source"], pa.string()),
        "quality_score": pa.array(columns["quality_score"], pa.float32()),
        "exact_hash": pa.array(columns["exact_hash"], pa.uint64()),
    }
    for band in range(bands):
        arrays[f"band_{band}"] = pa.array(banded[:, band], pa.uint64())
    flat = pa.array(matrix.reshape(-1), pa.uint32())
    offsets = pa.array(np.arange(0, matrix.size + 1, config.num_perm, dtype=np.int32))
    arrays["minhash"] = pa.ListArray.from_arrays(offsets, flat)
    table = pa.table(arrays)
    return table.replace_schema_metadata(
        {f"dedup.{k}": v for k, v in config.signature_params().items()}
    )
