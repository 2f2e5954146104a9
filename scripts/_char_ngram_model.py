"""A linear model over hashed character n-grams: the second model family the toxicity model's
selection tries (``scripts/train_toxicity_model.py``; development only, nothing here ships).

A sentence is read as its lower-cased word tokens joined by spaces (what the fastText model
reads), padded with a space; every character 2- to 5-gram is hashed (FNV-style, in numpy,
over the whole batch at once) into ``2**bits`` buckets. The features are the bucket counts
divided by the square root of the number of n-grams (about the L2 norm), and a logistic
regression with L2 regularisation (``C``; liblinear, deterministic) learns one weight per
bucket. Scoring needs no scikit-learn: a gather and a sum per sentence::

    model = CharNgramModel.train(lines, labels, c=16.0)
    model.probabilities_of_words([["you", "are", "kind"]])
"""

from __future__ import annotations

import numpy as np

_PRIME = np.uint32(0x01000193)
_MIX = np.uint32(0x85EBCA6B)


def ngram_buckets(
    lines: list[str], *, bits: int, low: int = 2, high: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """(row, bucket) of every character n-gram (``low`` to ``high``) of ``" line "``."""
    text = "\x00" + "\x00".join(f" {line} " for line in lines) + "\x00"
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    is_break = codes == 0
    breaks = np.cumsum(is_break, dtype=np.int64)
    row_of = breaks - 1
    rows, buckets = [], []
    h = np.zeros(len(codes), dtype=np.uint32)
    shift = np.uint32(32 - bits)
    for n in range(1, high + 1):
        m = len(codes) - n + 1
        h = h[:m] * _PRIME + codes[n - 1 :]
        if n < low:
            continue
        inside = (breaks[n - 1 :] == breaks[:m]) & ~is_break[:m]  # no line break in the window
        seed = np.uint32((n * 0x9E3779B1) & 0xFFFFFFFF)
        rows.append(row_of[:m][inside])
        buckets.append(((h ^ seed) * _MIX >> shift)[inside])
    return np.concatenate(rows), np.concatenate(buckets).astype(np.int64)


class CharNgramModel:
    def __init__(self, weights: np.ndarray, bias: float, bits: int) -> None:
        self.weights, self.bias, self.bits = weights.astype(np.float32), bias, bits

    @classmethod
    def train(
        cls, lines: list[str], labels: list[bool], *, c: float = 16.0, bits: int = 18
    ) -> CharNgramModel:
        from scipy import sparse
        from sklearn.linear_model import LogisticRegression

        rows, buckets = ngram_buckets(lines, bits=bits)
        counts = np.bincount(rows, minlength=len(lines)).astype(np.float64)
        values = 1.0 / np.sqrt(np.maximum(counts, 1.0))[rows]
        matrix = sparse.csr_matrix((values, (rows, buckets)), shape=(len(lines), 1 << bits))
        matrix.sum_duplicates()
        model = LogisticRegression(C=c, solver="liblinear", random_state=0, max_iter=200)
        model.fit(matrix, np.asarray(labels, dtype=np.int64))
        return cls(model.coef_[0], float(model.intercept_[0]), bits)

    def probabilities_of_lines(self, lines: list[str]) -> list[float]:
        if not lines:
            return []
        rows, buckets = ngram_buckets(lines, bits=self.bits)
        counts = np.bincount(rows, minlength=len(lines))
        sums = np.bincount(rows, weights=self.weights[buckets], minlength=len(lines))
        z = sums / np.sqrt(np.maximum(counts, 1)) + self.bias
        return (1.0 / (1.0 + np.exp(-z))).tolist()

    def probabilities_of_words(self, words: list[list[str]]) -> list[float]:
        return self.probabilities_of_lines([" ".join(w) for w in words])

    @property
    def bytes_as_float16(self) -> int:
        """Its size as a shipped file would hold it (one float16 per bucket)."""
        return self.weights.astype(np.float16).nbytes
