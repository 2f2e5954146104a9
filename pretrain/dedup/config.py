"""Dedup configuration shared by signatures, clustering and apply.

``bands * rows`` must equal ``num_perm`` when both are given; set both to ``None`` to let
datasketch's optimal-parameter search pick them for ``threshold`` (then ``bands * rows`` may
be a little under ``num_perm``; the extra permutations still count in verification)::

    from pretrain.dedup.config import DedupConfig
    DedupConfig()                                  # 112 perms = 14 bands x 8 rows
    DedupConfig(bands=None, rows=None, threshold=0.7).band_rows  # e.g. (12, 9)
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from pretrain.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class DedupConfig:
    num_perm: int = 112
    bands: int | None = 14
    rows: int | None = 8
    threshold: float = 0.8  # estimated Jaccard a candidate pair needs to count as a duplicate
    ngram: int = 5  # word shingle size
    char_ngram: int = 5  # character shingle size for CJK/Thai text (no spaces between words)
    cjk_fraction: float = 0.3  # share of CJK/Thai characters that switches to char shingles
    seed: int = 1
    verify: bool = True  # check candidate pairs by signature agreement >= threshold
    max_bucket_pairs: int = 100  # larger buckets pair every member with the first only

    def __post_init__(self) -> None:
        if self.num_perm < 2:
            raise ConfigError(f"num_perm={self.num_perm}: use at least 2 (112 or 128 typical)")
        if (self.bands is None) != (self.rows is None):
            raise ConfigError("set both bands and rows, or neither (derive from threshold)")
        if self.bands is not None and self.rows is not None:
            if self.bands < 1 or self.rows < 1 or self.bands * self.rows != self.num_perm:
                raise ConfigError(
                    f"bands={self.bands} x rows={self.rows} != num_perm={self.num_perm}: "
                    "pick a factorization of num_perm (e.g. 14 x 8 for 112) or set both to None"
                )
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"threshold={self.threshold}: use a Jaccard value in (0, 1]")
        if self.ngram < 1 or self.char_ngram < 1:
            raise ConfigError("ngram and char_ngram must be >= 1")
        if not 0.0 < self.cjk_fraction <= 1.0:
            raise ConfigError(f"cjk_fraction={self.cjk_fraction}: use a fraction in (0, 1]")
        if self.max_bucket_pairs < 2:
            raise ConfigError(f"max_bucket_pairs={self.max_bucket_pairs}: use at least 2")

    @property
    def band_rows(self) -> tuple[int, int]:
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        return _optimal_band_rows(self.threshold, self.num_perm)

    def signature_params(self) -> dict[str, str]:
        """What must match between signature files for them to be compared."""
        bands, rows = self.band_rows
        keys = ("num_perm", "ngram", "char_ngram", "cjk_fraction", "seed")
        params = {k: str(v) for k, v in asdict(self).items() if k in keys}
        return {**params, "bands": str(bands), "rows": str(rows), "scheme": "affine32"}


@functools.cache
def _optimal_band_rows(threshold: float, num_perm: int) -> tuple[int, int]:
    from datasketch.lsh import _optimal_param

    bands, rows = _optimal_param(threshold, num_perm, 0.5, 0.5)
    return int(bands), int(rows)
