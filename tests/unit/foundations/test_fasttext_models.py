"""``pretrain/fasttext_models.py``: training gives the same bytes in any process.

fastText with one thread initializes only the first tenth of its input matrix; the rest is
whatever memory the allocator returns. In a process that has freed much before (CI, after
hundreds of tests), that was leftovers: a retrain's bytes differed, and now and then training
stopped at once with "Encountered NaN". Training zero-fills its allocations, so a dirty heap
changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pretrain.errors import ConfigError
from pretrain.fasttext_models import load_supervised, train_supervised

# a small bucket keeps the input matrix on the heap (large ones come from fresh, zeroed pages)
LINES = [f"__label__{'a' if i % 2 else 'b'} {'alpha' if i % 2 else 'beta'}{i % 5} w{i % 7} t"
         for i in range(60)]  # fmt: skip
SETTINGS = {"epoch": 5, "lr": 0.5, "dim": 8, "word_ngrams": 2, "seed": 3, "bucket": 1000}


def _dirty_the_heap() -> None:
    """Allocate and free many small blocks of random floats: leftovers for the next malloc."""
    junk = [np.random.default_rng(i).random(200) for i in range(3000)]
    del junk


def test_a_retrain_on_a_dirty_heap_gives_the_same_bytes(tmp_path: Path) -> None:
    digests = []
    for i in range(3):
        _dirty_the_heap()
        model = train_supervised(LINES, str(tmp_path / f"m{i}.bin"), **SETTINGS)
        digests.append((tmp_path / f"m{i}.bin").read_bytes())
        assert model.predict("alpha1 w1")[0] == ("__label__a",)
    assert digests[0] == digests[1] == digests[2]
    loaded = load_supervised(str(tmp_path / "m0.bin"))
    assert loaded.predict("beta2 w2")[0] == ("__label__b",)


def test_a_divergence_says_what_to_change(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"diverged \(NaN\) at lr=1000.0, bucket=10: lower lr"):
        train_supervised(LINES, str(tmp_path / "m.bin"), **{**SETTINGS, "lr": 1000.0, "bucket": 10})
    assert not (tmp_path / "m.bin").exists()
