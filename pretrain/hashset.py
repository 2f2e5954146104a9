"""Hashing helpers: a set of 64-bit keys at about 8 bytes per key, for "seen before?" checks over a
whole shard, and a seeded hash rank (``hash_score``) for reproducible samples and splits.

    from pretrain.hashset import HashSet64, key64
    seen = HashSet64()
    if not seen.add(key64(hashlib.blake2b(url.encode(), digest_size=8).digest())):
        ...  # a duplicate

A Python ``set`` of digests costs 50–100 bytes per entry (object headers, the hash table): about
100 MB for a million URLs in one shard. Here new keys go to a small Python set that is merged
into one sorted ``numpy.uint64`` array every ``merge_every`` keys (one ``searchsorted`` +
``insert``, linear in the array), and lookups binary-search the array. Two different inputs share
a 64-bit key with probability about n²/2^65 (3·10⁻⁶ at 10 M keys); callers that drop on a hit
record it with a reason, so such a collision is visible, never silent.
"""

from __future__ import annotations

import hashlib

import numpy as np

HASH_BUCKETS = 10**6


def hash_score(seed: int, key: str) -> int:
    """Deterministic bucket in [0, 10**6) for ``key`` under ``seed``: the mixture's validation
    split, the tokenizer's training sample and the experiment basis rank documents by it."""
    return int(hashlib.sha1(f"{seed}:{key}".encode()).hexdigest(), 16) % HASH_BUCKETS


def key64(digest: bytes) -> int:
    """The first 8 bytes of a digest as an unsigned 64-bit key."""
    return int.from_bytes(digest[:8], "little")


class HashSet64:
    def __init__(self, merge_every: int = 65536) -> None:
        self._sorted = np.empty(0, dtype=np.uint64)
        self._recent: set[int] = set()
        self._merge_every = merge_every

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, key: int) -> bool:
        if key in self._recent:
            return True
        i = int(np.searchsorted(self._sorted, np.uint64(key)))
        return i < len(self._sorted) and int(self._sorted[i]) == key

    def add(self, key: int) -> bool:
        """Add ``key``; True if it was new, False if it was already there."""
        if key in self:
            return False
        self._recent.add(key)
        if len(self._recent) >= self._merge_every:
            self._merge()
        return True

    @property
    def nbytes(self) -> int:
        """Bytes held by the sorted array (the recent set adds at most ``merge_every`` entries)."""
        return int(self._sorted.nbytes)

    def _merge(self) -> None:
        new = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
        new.sort()
        self._sorted = np.insert(self._sorted, np.searchsorted(self._sorted, new), new)
        self._recent.clear()
