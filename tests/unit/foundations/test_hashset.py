"""``HashSet64``: exact membership across merges, 8 bytes per key."""

import hashlib
import random

from pretrain.hashset import HashSet64, key64


def test_membership_matches_a_python_set_across_merges() -> None:
    rng = random.Random(0)
    keys = [rng.getrandbits(64) for _ in range(5000)] + [0, 2**64 - 1]
    keys += keys[:700]  # repeats, some after their first copy was merged
    seen, reference = HashSet64(merge_every=256), set()
    for key in keys:
        assert seen.add(key) == (key not in reference)
        reference.add(key)
        assert key in seen
    assert len(seen) == len(reference)
    assert all(k in seen for k in reference)
    assert not any(rng.getrandbits(64) in seen for _ in range(2000))  # fresh keys are absent
    assert seen.nbytes <= 8 * len(reference)


def test_key64_takes_the_digest_prefix() -> None:
    digest = hashlib.blake2b(b"https://example.com/a", digest_size=8).digest()
    assert key64(digest) == int.from_bytes(digest, "little") and key64(digest) < 2**64
