"""Dedup configuration: document-level (exact, URL, MinHash-LSH) and line/paragraph-level.

``bands * rows`` must equal ``num_perm`` when both are given; set both to ``None`` to let
datasketch's optimal-parameter search pick them for ``threshold`` (then ``bands * rows`` may
be a little under ``num_perm``; the extra permutations still count in verification)::

    from pretrain.dedup.config import DedupConfig, LineDedupConfig
    DedupConfig()                                  # 112 perms = 14 bands x 8 rows (FineWeb)
    DedupConfig(bands=None, rows=None, threshold=0.7).band_rows  # e.g. (12, 9)
    LineDedupConfig(min_documents=2)               # drop lines found in >= 2 kept documents
    LineDedupConfig(unit="paragraph", min_documents=50)
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

from pretrain.errors import ConfigError
from pretrain.settings import check_types

VERIFY_MODES = ("jaccard", "signature", "none")
NORMALIZATIONS = ("v2", "v1")
LINE_UNITS = ("line", "paragraph")


@dataclass(frozen=True, kw_only=True)
class LineDedupConfig:
    """Boilerplate removal: a line (or paragraph) kept in ``>= min_documents`` documents goes.

    Counted over the documents that survive document-level dedup, so copies of one page do
    not make its content look like boilerplate. ``min_documents=0`` switches it off.
    """

    min_documents: int = 20
    unit: str = "line"
    min_chars: int = 1  # shorter lines (after stripping) are never counted nor removed
    skip_sources: tuple[str, ...] = ("code",)  # repeated code lines are meaning, not boilerplate

    def __post_init__(self) -> None:
        check_types(self)
        if self.min_documents == 1 or self.min_documents < 0:
            raise ConfigError(
                f"min_documents={self.min_documents}: use 0 (off) or >= 2 (a line in that many "
                "documents is boilerplate); 1 would delete every line"
            )
        if self.unit not in LINE_UNITS:
            raise ConfigError(f"unit={self.unit!r}: use one of {LINE_UNITS}")
        if self.min_chars < 1:
            raise ConfigError(f"min_chars={self.min_chars}: use at least 1")

    @property
    def enabled(self) -> bool:
        return self.min_documents >= 2


@dataclass(frozen=True, kw_only=True)
class DedupConfig:
    num_perm: int = 112
    bands: int | None = 14
    rows: int | None = 8
    threshold: float = 0.8  # Jaccard a candidate pair needs to count as a duplicate
    ngram: int = 5  # word shingle size
    char_ngram: int = 5  # character shingle size for CJK/Thai text (no spaces between words)
    cjk_fraction: float = 0.3  # share of CJK/Thai characters that switches to char shingles
    seed: int = 1
    # Text normalization before shingling and exact keys (pretrain.dedup.shingles): "v2" =
    # NFKC, lower-case, punctuation/symbols removed, digits -> 0; "v1" = lower-case only.
    normalization: str = "v2"
    # "jaccard": true shingle Jaccard recomputed from the texts of candidate documents;
    # "signature": share of equal MinHash values (estimate); "none": every candidate counts.
    verify: str = "jaccard"
    # LSH pairs below ``threshold`` whose smaller document has >= this share of its shingles
    # in the other go to containment.parquet (listed, not removed); 0 switches it off.
    containment_threshold: float = 0.8
    max_bucket_pairs: int = 100  # larger buckets pair every member with the first only
    url_dedup: bool = True  # same URL (fragment and trailing slash ignored) → duplicate
    max_partition_rows: int = 2_000_000  # bucket rows per band partition (bounds memory)
    # Hash slices per band for ``dedup_pairs[band-slice]`` (partitions = bands x slices; each
    # further splits its slice so that it holds at most ``max_partition_rows`` rows at once).
    hash_slices: int = 1
    incremental: bool = True  # keep earlier survivors; only new/changed shards are decided
    lines: LineDedupConfig = field(default_factory=LineDedupConfig)
    max_duplicate_rate: float = 0.6  # asset-check bound: warn when more documents are removed

    def __post_init__(self) -> None:
        check_types(self)
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
        if self.normalization not in NORMALIZATIONS:
            raise ConfigError(
                f"normalization={self.normalization!r}: use one of {NORMALIZATIONS} "
                "('v1' reproduces signatures computed before normalization v2)"
            )
        if self.verify not in VERIFY_MODES:
            raise ConfigError(f"verify={self.verify!r}: use one of {VERIFY_MODES}")
        if not 0.0 <= self.containment_threshold <= 1.0:
            raise ConfigError(
                f"containment_threshold={self.containment_threshold}: use a share in [0, 1] "
                "(0 switches containment reporting off)"
            )
        if self.max_bucket_pairs < 2:
            raise ConfigError(f"max_bucket_pairs={self.max_bucket_pairs}: use at least 2")
        if self.max_partition_rows < 16:
            raise ConfigError(
                f"max_partition_rows={self.max_partition_rows}: use at least 16 "
                "(a few million keeps each band partition to ~100 MB)"
            )
        if not 1 <= self.hash_slices <= 256:
            raise ConfigError(
                f"hash_slices={self.hash_slices}: use 1..256 (partitions = bands x slices; keep "
                "them under a few thousand, and let max_partition_rows bound each one's memory)"
            )

    @property
    def band_rows(self) -> tuple[int, int]:
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        return _optimal_band_rows(self.threshold, self.num_perm)

    def signature_params(self) -> dict[str, str]:
        """What must match between signature files for them to be compared."""
        import polars

        bands, rows = self.band_rows
        keys = ("num_perm", "ngram", "char_ngram", "cjk_fraction", "seed", "normalization")
        params = {k: str(v) for k, v in asdict(self).items() if k in keys}
        # Token hashes come from polars' seeded string hash, stable within one polars release.
        scheme = f"affine32-polars{polars.__version__}"
        return {**params, "bands": str(bands), "rows": str(rows), "scheme": scheme}

    def decision_params(self) -> dict[str, str]:
        """What must match for earlier survivors to stay valid in incremental mode."""
        keys = ("threshold", "verify", "max_bucket_pairs", "url_dedup")
        return {**self.signature_params(), **{k: str(getattr(self, k)) for k in keys}}


@functools.cache
def _optimal_band_rows(threshold: float, num_perm: int) -> tuple[int, int]:
    from datasketch.lsh import _optimal_param

    bands, rows = _optimal_param(threshold, num_perm, 0.5, 0.5)
    return int(bands), int(rows)
