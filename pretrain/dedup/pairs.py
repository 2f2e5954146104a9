"""Band-partitioned dedup: verified pairs per ``band x hash slice``, then one union.

The single-process :func:`pretrain.dedup.clusters.cluster_duplicates` split in two stages
that Dagster can fan out (``dedup_pairs[band-slice]`` → ``dedup_clusters``):

1. :func:`band_pairs` — one band partition (``exact-s000``, ``url-s000``, ``b007-s003``):
   reads only its own rows of every shard's ``buckets.parquet`` (row-group pruning on the
   sorted ``(band, h)`` columns), makes candidate pairs, verifies LSH candidates (true
   Jaccard by default) and writes ``pairs.parquet`` (``a, b`` node numbers). A slice holding
   more than ``max_partition_rows`` rows is read in sub-slices, so memory stays flat as the
   corpus grows.
2. :func:`cluster_band_pairs` — the union of every partition's pairs, survivor choice,
   boilerplate and incremental state, written exactly as ``cluster_duplicates`` writes them:
   ``clusters.parquet`` is byte-identical (the clusters depend on the set of pairs only, and a
   bucket never spans two hash slices).

Each pairs file records a *plan token* (shards, their fingerprints and node offsets, the
previous clustering state, the decision parameters): the union refuses pairs computed
against other inputs, so a stale partition is re-materialized, never silently mixed in::

    from pretrain.dedup.pairs import band_partition_keys, band_pairs, cluster_band_pairs
    for key in band_partition_keys(config):
        band_pairs(signature_uris, clusters_dir, f"{pairs_dir}/{key}/pairs.parquet", key, config)
    stats = cluster_band_pairs(signature_uris, pairs_dir, clusters_dir, config)
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.checks import CheckOutcome
from pretrain.dedup.buckets import partition_pairs, rows_in, unique_pairs
from pretrain.dedup.clusters import ClusterInputs, peak_rss_mb, write_clusters
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.jaccard import verify_pairs
from pretrain.dedup.lines import hash_range_filter
from pretrain.dedup.minhash import EXACT_BAND, URL_BAND
from pretrain.dedup.stats import ClusterStats
from pretrain.errors import ConfigError, DataError

PAIRS_FILE = "pairs.parquet"
_KEY_BANDS = {"exact": EXACT_BAND, "url": URL_BAND}


def band_partition_keys(config: DedupConfig) -> list[str]:
    """Every band partition of ``config``: exact, url, then each LSH band, x slices. The url
    partition is there with ``url_dedup`` off too (it then finds no pairs), so that switching
    URL dedup does not change the partitions."""
    bands, _ = config.band_rows
    names = ["exact", "url"] + [f"b{b:03d}" for b in range(bands)]
    return [f"{name}-s{s:03d}" for name in names for s in range(config.hash_slices)]


def check_partition_layout(config: DedupConfig, partition_keys: Sequence[str]) -> None:
    """Refuse ``config`` when its band partitions are not ``partition_keys`` (the static
    partitions an orchestrator built from the default config): a run with other ``bands`` or
    ``hash_slices`` would find partitions missing, or leave bands unverified."""
    wanted = band_partition_keys(config)
    if wanted == list(partition_keys):
        return
    have_bands = sum(k.startswith("b") and k.endswith("-s000") for k in partition_keys)
    have_slices = sum(k.startswith("exact-") for k in partition_keys)
    raise ConfigError(
        f"dedup bands={config.band_rows[0]} x hash_slices={config.hash_slices} need "
        f"{len(wanted)} band partitions, but dedup_pairs has {len(partition_keys)} "
        f"(bands={have_bands} x hash_slices={have_slices}), fixed when the definitions load: keep "
        "dedup.num_perm, bands, rows and hash_slices as they are, or change their defaults in "
        "pretrain/dedup/config.py (the partitions follow the defaults)"
    )


def parse_key(key: str, config: DedupConfig) -> tuple[int, int]:
    """``"b007-s002"`` → ``(7, 2)``; ``"exact-s000"`` → ``(EXACT_BAND, 0)``."""
    if key not in band_partition_keys(config):
        raise ConfigError(
            f"band partition {key!r} does not exist for this DedupConfig (bands x hash_slices = "
            f"{config.band_rows[0]} x {config.hash_slices}): the dedup_pairs partitions are "
            "sized from the default config; launch with the same sizes"
        )
    name, _, part = key.partition("-s")
    band = _KEY_BANDS[name] if name in _KEY_BANDS else int(name.removeprefix("b"))
    return band, int(part)


def containment_uri(pairs_file_uri: str) -> str:
    """The containment rows written next to a partition's ``pairs.parquet``."""
    return pairs_file_uri.rsplit("/", 1)[0] + "/containment.parquet"


def pairs_uri(pairs_dir_uri: str, key: str) -> str:
    return storage.join(pairs_dir_uri, key, PAIRS_FILE)


@dataclass(frozen=True, kw_only=True)
class BandPairStats:
    key: str
    band: int
    hash_slice: int
    sub_slices: int  # reads of this slice, each at most max_partition_rows rows
    bucket_rows: int  # rows of buckets.parquet that fell in this partition
    peak_partition_rows: int
    candidate_pairs: int
    pairs: int  # written: exact/URL pairs, or LSH pairs that passed verification
    peak_rss_mb: float
    seconds: float

    def as_metadata(self) -> dict[str, int | float | str]:
        return asdict(self)


def band_pairs(
    signature_uris: list[str],
    clusters_dir_uri: str,
    output_uri: str,
    key: str,
    config: DedupConfig,
) -> BandPairStats:
    """Candidate pairs of one band partition, verified; written to ``output_uri``."""
    started = time.monotonic()
    band, hash_slice = parse_key(key, config)
    off = band == URL_BAND and not config.url_dedup  # the url partition finds no pairs then
    inputs = ClusterInputs.open(signature_uris, clusters_dir_uri, config)
    subs, token = inputs.sub_slices(config), inputs.plan_token(config)
    masks = inputs.masks
    found, peak, rows = [], 0, 0
    for sub in range(0 if off else subs):
        part = hash_range_filter(hash_slice * subs + sub, config.hash_slices * subs)
        pairs, held = partition_pairs(
            inputs.shards, band, part, config, eligible=masks.eligible if masks else None,
            is_fresh=masks.is_fresh if masks else None,
        )  # fmt: skip
        found.append(pairs)
        peak, rows = max(peak, held), rows + held
    candidates = unique_pairs(found)
    if band < 0:
        kept, contained = candidates, np.empty((0, 3), np.float64)
    else:
        kept, contained = verify_pairs(candidates, inputs.shards, config)
    table = pa.table({"a": pa.array(kept[:, 0], pa.int64()), "b": pa.array(kept[:, 1], pa.int64())})
    storage.write_table(  # containment rows of this partition (listed, never removed)
        pa.table({
            "contained": pa.array(contained[:, 0], pa.float64()),
            "container": pa.array(contained[:, 1], pa.float64()),
            "containment": pa.array(contained[:, 2], pa.float64()),
        }),
        containment_uri(output_uri),
    )  # fmt: skip
    stats = BandPairStats(
        key=key, band=band, hash_slice=hash_slice, sub_slices=subs, bucket_rows=rows,
        peak_partition_rows=peak, candidate_pairs=len(candidates), pairs=len(kept),
        peak_rss_mb=peak_rss_mb(), seconds=round(time.monotonic() - started, 3),
    )  # fmt: skip
    # timings and RSS stay out of the file: a rerun of the same partition is byte-identical
    counts = {k: v for k, v in asdict(stats).items() if k not in ("seconds", "peak_rss_mb")}
    meta = {"dedup.plan": token, "dedup.stats": json.dumps(counts)}
    storage.write_table(table.replace_schema_metadata(meta), output_uri, row_group_size=1 << 20)
    return stats


def cluster_band_pairs(
    signature_uris: list[str], pairs_dir_uri: str, output_dir_uri: str, config: DedupConfig
) -> ClusterStats:
    """Union of every band partition's pairs → ``clusters.parquet`` and the rest (see above)."""
    started = time.monotonic()
    uris = {key: pairs_uri(pairs_dir_uri, key) for key in band_partition_keys(config)}
    inputs = ClusterInputs.open(signature_uris, output_dir_uri, config)
    token = inputs.plan_token(config)
    exact: list[np.ndarray] = []
    near: list[np.ndarray] = []
    contained: list[np.ndarray] = []
    missing: list[str] = []
    stale: list[str] = []
    candidates = partitions = peak = 0
    for key, uri in uris.items():
        if not storage.exists(uri):
            missing.append(key)
            continue
        meta = read_pairs_meta(uri)
        if meta.get("dedup.plan") != token:
            stale.append(key)
            continue
        table = storage.read_table(uri)
        stats = json.loads(meta["dedup.stats"])
        candidates += stats["candidate_pairs"] if stats["band"] >= 0 else 0
        partitions += stats["sub_slices"]
        peak = max(peak, stats["peak_partition_rows"])
        pairs = np.stack([table.column("a").to_numpy(), table.column("b").to_numpy()], axis=1)
        (exact if stats["band"] < 0 else near).append(pairs.astype(np.int64).reshape(-1, 2))
        if storage.exists(containment_uri(uri)):
            rows = storage.read_table(containment_uri(uri))
            contained.append(np.stack([rows.column(n).to_numpy() for n in rows.column_names], 1))
    if missing or stale:
        raise DataError(
            f"dedup_pairs partitions missing {missing[:5]} ({len(missing)}) or computed against "
            f"other shards or an earlier clustering {stale[:5]} ({len(stale)}): materialize "
            "those dedup_pairs partitions (a backfill of all of them), then dedup_clusters"
        )
    exact_pairs, near_pairs = unique_pairs(exact), unique_pairs(near)
    if len(exact_pairs) and len(near_pairs):
        near_pairs = near_pairs[~rows_in(near_pairs, exact_pairs)]
    return write_clusters(
        inputs, exact_pairs, near_pairs, output_dir_uri, config, candidate_pairs=candidates,
        partitions=partitions, peak_partition_rows=peak, started=started,
        contained=np.concatenate(contained) if contained else None,
    )  # fmt: skip


def check_pairs(uri: str, num_documents: int) -> CheckOutcome:
    """Recomputed from the file: every pair ``a < b``, both nodes inside the corpus, no repeats."""
    table = storage.read_table(uri)
    a, b = table.column("a").to_numpy(), table.column("b").to_numpy()
    ordered = bool(np.all(a < b))
    inside = bool(len(a) == 0 or (a.min() >= 0 and b.max() < num_documents))
    unique = len(np.unique(np.stack([a, b], axis=1), axis=0)) == len(a) if len(a) else True
    return CheckOutcome(
        ordered and inside and unique,
        f"{len(a)} pairs; a < b: {ordered}; nodes in [0, {num_documents}): {inside}; "
        f"no repeats: {unique}",
        {"pairs": len(a), "documents": num_documents},
    )


def read_pairs_meta(uri: str) -> dict[str, str]:
    """The footer metadata of one pairs file (plan token, stats) without reading its rows."""
    fs, path = storage.filesystem(uri)
    with fs.open_input_file(path) as f:
        raw = pq.ParquetFile(f).schema_arrow.metadata or {}
    return {k.decode(): v.decode() for k, v in raw.items()}
