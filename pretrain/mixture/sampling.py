"""Per-source sampling: the train/validation split and the quality-weighted document stream.

A source's training documents form an endless stream, epoch after epoch. Epoch ``e`` lists
every document once, in the order of the Efraimidis–Spirakis key ``log(u) / w`` (descending),
where ``u`` is a uniform number hashed from ``(seed, e, id)`` and ``w = quality_score ** alpha``.
Taking a prefix of that order is weighted sampling without replacement: the first document is
drawn with probability ``w / sum(w)``, and so on; ``alpha = 0`` is uniform. Curriculum stages
consume consecutive stretches of the stream, so a document repeats only after every other
document of its source has been used as often, and ``(id, epoch)`` is unique.

    from pretrain.mixture.sampling import split_source, walk_stream
    val, train = split_source(ids, config)
    picks = walk_stream(train, chars, quality, config, targets=[1_000, 500])  # per stage
    picks[1]                # [(id, epoch), ...] taken by the second stage
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator

import numpy as np

from pretrain.hashset import HASH_BUCKETS, hash_score
from pretrain.mixture.config import MixtureConfig

_U_SCALE = 2.0**-53


def split_source(ids: list[str], config: MixtureConfig) -> tuple[set[str], list[str]]:
    """Return (validation ids, train ids in hash order) for one source.

    A document is validation iff its hash bucket is below ``val_fraction``; a source with at
    least two documents but fewer than ``min_val_docs`` validation ones promotes its
    lowest-hash train documents. A source with at least two documents always keeps one to
    train on: when every one hashes under the cut (a few large documents, such as whole
    books), its highest-hash document trains."""
    ordered = sorted(ids, key=lambda i: (hash_score(config.seed, i), i))
    cut = round(config.val_fraction * HASH_BUCKETS)
    val = [i for i in ordered if hash_score(config.seed, i) < cut]
    if len(ids) >= 2 and len(val) < config.min_val_docs:
        val = ordered[: min(config.min_val_docs, len(ids) - 1)]
    if len(ids) >= 2 and len(val) == len(ids):
        val = ordered[:-1]
    val_set = set(val)
    return val_set, [i for i in ordered if i not in val_set]


def _uniform(seed: int, key: str) -> float:
    """A uniform number in (0, 1) from 53 bits of sha1 — identical on every machine."""
    bits = int.from_bytes(hashlib.sha1(f"{seed}:{key}".encode()).digest()[:8], "big") >> 11
    return (bits + 0.5) * _U_SCALE


def quality_weights(quality: list[float | None], alpha: float) -> np.ndarray:
    """``quality ** alpha`` with a missing score counted as 1.0 (neutral)."""
    q = np.array([1.0 if v is None else float(v) for v in quality], dtype=np.float64)
    if alpha == 0.0:
        return np.ones_like(q)
    return np.power(np.clip(q, 0.0, None), alpha)


def epoch_order(ids: list[str], weights: np.ndarray, seed: int, epoch: int) -> list[int]:
    """Indices of ``ids`` in epoch ``epoch``'s sampling order (see the module docstring)."""
    log_u = np.array([math.log(_uniform(seed, f"sample:{epoch}:{i}")) for i in ids])
    with np.errstate(divide="ignore"):
        keys = np.where(weights > 0, log_u / np.where(weights > 0, weights, 1.0), -np.inf)
    # lexsort: last key is primary; ties (only weight-0 documents) fall back to id order
    return np.lexsort((np.array(ids, dtype=object).argsort().argsort(), -keys)).tolist()


def _stream(
    ids: list[str], weights: np.ndarray, seed: int
) -> Iterator[tuple[int, int]]:  # (index, epoch)
    epoch = 0
    while True:
        for index in epoch_order(ids, weights, seed, epoch):
            yield index, epoch
        epoch += 1


def walk_stream(
    ids: list[str],
    chars: list[int],
    quality: list[float | None],
    config: MixtureConfig,
    targets: list[int],
) -> list[list[tuple[str, int]]]:
    """Per stage, the (id, epoch) pairs taken: documents are taken while a stage holds fewer
    than its target characters (so a stage overshoots by less than one document)."""
    picks: list[list[tuple[str, int]]] = [[] for _ in targets]
    if not ids or sum(chars) == 0:
        return picks
    stream = _stream(ids, quality_weights(quality, config.quality_alpha), config.seed)
    for stage, target in enumerate(targets):
        taken = 0
        while taken < target:
            index, epoch = next(stream)
            picks[stage].append((ids[index], epoch))
            taken += chars[index]
    return picks
