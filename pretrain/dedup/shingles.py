"""Vectorized shingling: a batch of texts → one flat array of (document, shingle hash).

Normalization, tokenization (word tokens, or characters for CJK/Thai text) and token hashing
run inside polars over the whole batch; n-gram combination and per-document de-duplication run
in numpy over flat arrays. No Python object is built per document or per token.

``DedupConfig.normalization`` picks the text normalization (recorded with every signature file,
so earlier runs can be reproduced):

- ``"v2"`` (default): NFKC, lower-case, punctuation and symbols (Unicode ``P*``/``S*``) become
  spaces, every run of decimal digits becomes ``0``, whitespace collapsed. Two editions of a
  book that differ in quotes, dashes, line wrapping, ligatures or page numbers shingle alike,
  and CJK character n-grams carry no punctuation (full-width ``，`` and ``,`` both vanish).
- ``"v1"`` (before issue 14): lower-case and whitespace collapsed only.

The same function keys exact dedup (:func:`text_hashes`) and true-Jaccard verification::

    from pretrain.dedup.config import DedupConfig
    from pretrain.dedup.shingles import batch_shingles
    batch = batch_shingles(["the cat sat on the mat today", "", "中文评论很好很好"], DedupConfig())
    batch.hashes, batch.owner    # uint32 shingle hashes, sorted by (document, hash); owner doc
    batch.counts                 # shingles per document: [3, 0, 4]

A text shorter than the shingle size is one shingle of all its tokens; an empty text has none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pretrain.dedup.config import DedupConfig

# CJK ideographs, kana, hangul and Thai: scripts written without spaces between words.
_CJK_CLASS = "[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_TOKEN_SEED = 0x5EED
# Odd 64-bit multipliers that give each n-gram position its own weight.
_POSITION_MULTIPLIERS = np.array(
    [((0x9E3779B97F4A7C15 ^ (i * 0xBF58476D1CE4E5B9)) & 0xFFFFFFFFFFFFFFFF) | 1 for i in range(64)],
    dtype=np.uint64,
)


@dataclass(frozen=True)
class ShingleBatch:
    hashes: np.ndarray  # uint32, unique within a document, sorted by (owner, hash)
    owner: np.ndarray  # int64 document index of each hash
    counts: np.ndarray  # int64 shingles per document
    char_shingled: np.ndarray  # bool per document: CJK/Thai text, cut into character n-grams

    def per_document(self) -> list[np.ndarray]:
        """Split into one array per document (tests and small tools; not the hot path)."""
        return np.split(self.hashes, np.cumsum(self.counts)[:-1]) if len(self.counts) else []

    @classmethod
    def concat(cls, batches: list[ShingleBatch]) -> ShingleBatch:
        """One batch of the documents of ``batches``, in order (documents renumbered)."""
        if not batches:
            empty = np.empty(0, np.int64)
            return cls(np.empty(0, np.uint32), empty, empty, np.empty(0, bool))
        counts = np.concatenate([b.counts for b in batches])
        return cls(
            hashes=np.concatenate([b.hashes for b in batches]),
            owner=np.repeat(np.arange(len(counts), dtype=np.int64), counts),
            counts=counts,
            char_shingled=np.concatenate([b.char_shingled for b in batches]),
        )


def normalized(texts: pl.Series, normalization: str = "v2") -> pl.Series:
    """``texts`` normalized as ``normalization`` says (see module docstring)."""
    texts = texts.fill_null("")
    if normalization == "v1":
        return texts.str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars()
    if normalization != "v2":
        raise ValueError(f"normalization={normalization!r}: use 'v2' or 'v1'")
    return (
        texts.str.normalize("NFKC")
        .str.to_lowercase()
        .str.replace_all(r"[\p{P}\p{S}]+", " ")
        .str.replace_all(r"\p{Nd}+", "0")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def text_hashes(texts: pl.Series, seed: int, normalization: str = "v2") -> np.ndarray:
    """uint64 hash of each normalized text (exact-duplicate key).

    A text that normalizes to nothing (only punctuation, symbols or emoji) keeps its v1 key:
    ``"!!!"`` and ``"???"`` are not duplicates of each other.
    """
    norm = normalized(texts, normalization)
    if normalization != "v1":
        norm = pl.select(
            pl.when(norm == "").then(normalized(texts, "v1")).otherwise(norm)
        ).to_series()
    return norm.hash(seed=seed).to_numpy().astype(np.uint64)


def batch_shingles(texts: list[str | None] | pl.Series, config: DedupConfig) -> ShingleBatch:
    """Shingle hashes of every text in the batch (see module docstring)."""
    series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, pl.String)
    norm = normalized(series, config.normalization)
    num_docs = len(norm)
    letters = norm.str.len_chars().fill_null(0) - norm.str.count_matches(" ").fill_null(0)
    cjk = norm.str.count_matches(_CJK_CLASS).fill_null(0)
    is_cjk = ((letters > 0) & (cjk >= config.cjk_fraction * letters)).to_numpy()

    frame = pl.DataFrame({"doc": np.arange(num_docs, dtype=np.int64), "t": norm, "cjk": is_cjk})
    words = frame.filter(~pl.col("cjk")).select("doc", pl.col("t").str.split(" ").alias("tok"))
    chars = frame.filter(pl.col("cjk")).select(
        "doc", pl.col("t").str.replace_all(" ", "", literal=True).str.split("").alias("tok")
    )
    tokens = (
        pl.concat([words, chars])
        .explode("tok")
        .filter(pl.col("tok").is_not_null() & (pl.col("tok") != ""))
        .sort("doc", maintain_order=True)
    )
    ids = tokens["tok"].hash(seed=_TOKEN_SEED + config.seed).to_numpy().astype(np.uint64)
    doc = tokens["doc"].to_numpy()
    lengths = np.bincount(doc, minlength=num_docs).astype(np.int64)
    ngram = np.where(is_cjk, config.char_ngram, config.ngram).astype(np.int64)
    hashes, owner = _ngram_hashes(ids, lengths, np.minimum(ngram, lengths))
    counts = np.bincount(owner, minlength=num_docs).astype(np.int64)
    return ShingleBatch(hashes=hashes, owner=owner, counts=counts, char_shingled=is_cjk)


def _ngram_hashes(
    ids: np.ndarray, lengths: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Unique uint32 n-gram hashes per document over the flat token array ``ids``."""
    widths = np.where(lengths > 0, lengths - n + 1, 0)
    total = int(widths.sum())
    if total == 0:
        return np.empty(0, np.uint32), np.empty(0, np.int64)
    owner = np.repeat(np.arange(len(lengths)), widths)
    doc_start = np.cumsum(lengths) - lengths
    width_start = np.cumsum(widths) - widths
    starts = np.arange(total) - width_start[owner] + doc_start[owner]
    n_of = n[owner]
    combined = np.zeros(total, dtype=np.uint64)
    for k in range(int(n.max())):
        use = k < n_of  # a short document's single shingle has fewer than ngram tokens
        index = np.where(use, starts + k, 0)
        term = ids[index] * _POSITION_MULTIPLIERS[k % 64]
        combined += np.where(use, term, np.uint64(0))
    folded = (combined ^ (combined >> np.uint64(32))).astype(np.uint32)
    # One sort over (document, hash) removes repeats within each document.
    keys = np.sort((owner.astype(np.uint64) << np.uint64(32)) | folded.astype(np.uint64))
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]]  # sort + mask beats np.unique's hashing
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32), (keys >> np.uint64(32)).astype(
        np.int64
    )


def jaccard_pairs(
    batch: ShingleBatch, left: np.ndarray, right: np.ndarray, max_keys: int = 1 << 18
) -> np.ndarray:
    """True Jaccard of shingle sets for document pairs ``(left[i], right[i])`` of ``batch``."""
    inter = intersections(batch, left, right, max_keys)
    union = batch.counts[left] + batch.counts[right] - inter
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def containment_pairs(batch: ShingleBatch, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``|A ∩ B| / min(|A|, |B|)``: how much of the smaller document lies inside the other."""
    inter = intersections(batch, left, right)
    smaller = np.minimum(batch.counts[left], batch.counts[right])
    return np.where(smaller > 0, inter / np.maximum(smaller, 1), 1.0)


def intersections(
    batch: ShingleBatch, left: np.ndarray, right: np.ndarray, max_keys: int = 1 << 18
) -> np.ndarray:
    """Shared shingles ``|A ∩ B|`` of document pairs ``(left[i], right[i])`` of ``batch``.

    Pairs are compared in slices of about ``max_keys`` shingles (both sides together, at
    least one pair), so memory stays bounded however many long documents the pairs repeat.
    """
    offsets = np.concatenate([[0], np.cumsum(batch.counts)])
    out = np.zeros(len(left), dtype=np.int64)
    keys_per_pair = batch.counts[left] + batch.counts[right]
    for start, end in _slices(keys_per_pair, max_keys):
        a, b = left[start:end], right[start:end]
        pair = np.arange(len(a), dtype=np.int64)
        keys = []
        for side in (a, b):
            sizes = batch.counts[side]
            pos = np.repeat(offsets[side], sizes) + _ranges(sizes)
            keys.append(
                (np.repeat(pair, sizes).astype(np.uint64) << np.uint64(32)) | batch.hashes[pos]
            )
        both = np.sort(np.concatenate(keys))
        shared = both[1:][both[1:] == both[:-1]] >> np.uint64(32)
        out[start:end] = np.bincount(shared.astype(np.int64), minlength=len(a))
    return out


def _slices(sizes: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, end)`` ranges whose ``sizes`` sum to about ``budget`` (>= 1 item)."""
    out, start, total = [], 0, np.cumsum(sizes)
    while start < len(sizes):
        base = total[start - 1] if start else 0
        end = max(start + 1, int(np.searchsorted(total, base + budget, side="right")))
        out.append((start, end))
        start = end
    return out


def _ranges(sizes: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s)`` for each size (vectorized)."""
    total = int(sizes.sum())
    starts = np.cumsum(sizes) - sizes
    return np.arange(total) - np.repeat(starts, sizes)
