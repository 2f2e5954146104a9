"""Band-partitioned dedup (``dedup_pairs[band-slice]`` → union) equals the single-op clustering.

- every band x slice partition written separately, then unioned: ``clusters.parquet`` is
  byte-identical to ``cluster_duplicates`` for 1 and 3 slices and for sub-sliced partitions;
- incremental mode: a second shard decided against the first gives the same bytes both ways;
- pairs computed against other inputs (or a missing partition) are refused with a reason;
- a partition key that the config does not have is a ConfigError that says why.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import compute_signatures
from pretrain.dedup.pairs import (
    band_pairs,
    band_partition_keys,
    check_pairs,
    cluster_band_pairs,
    pairs_uri,
)
from pretrain.errors import ConfigError, DataError

WORDS = ("harbour tide lantern copper meadow violin orchard glacier pepper saddle thunder "
         "marble quiet ribbon canyon falcon ember willow").split()  # fmt: skip


def _text(seed: int, length: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(f"{rng.choice(WORDS)}{rng.randrange(50)}" for _ in range(length))


def _doc(text: str, url: str, quality: float = 0.5) -> dict:
    return {"id": doc_id(text, "web", url), "text": text, "source": "web", "url": url,
            "num_chars": len(text), "quality_score": quality}  # fmt: skip


def _near(seed: int, edits: int) -> str:
    words = _text(seed).split(" ")
    for i in range(edits):
        words[7 + 11 * i] = f"edit{i}"
    return " ".join(words)


def _corpus() -> list[list[dict]]:
    """Two shards: exact copies, a URL copy, near copies, and one bucket above the star limit."""
    first = [_doc(_text(i), f"https://a.example/{i}", quality=0.1 * (i % 7)) for i in range(30)]
    first += [_doc(_text(3), "a/copy3", quality=0.9), _doc(_near(5, 2), "a/near5")]
    second = [_doc(_text(100 + i), f"b/{i}") for i in range(20)]
    second += [_doc(_near(5, 1), "b/near5"), _doc(_text(200), "https://a.example/7/#frag")]
    second += [_doc(_near(40, i % 3), f"b/star{i}", quality=0.01 * i) for i in range(12)]
    return [first, second]


def _signatures(tmp: Path, shards: list[list[dict]], config: DedupConfig) -> list[str]:
    uris = []
    for i, docs in enumerate(shards):
        docs_uri = str(tmp / "docs" / f"s{i}" / "documents.parquet")
        storage.write_table(documents_table(docs), docs_uri)
        uris.append(str(tmp / "sig" / f"s{i}" / "signatures.parquet"))
        compute_signatures(docs_uri, uris[-1], config)
    return uris


def _fan_out(sigs: list[str], pairs_dir: Path, clusters_dir: Path, config: DedupConfig):
    for key in band_partition_keys(config):
        band_pairs(sigs, str(clusters_dir), pairs_uri(str(pairs_dir), key), key, config)
    return cluster_band_pairs(sigs, str(pairs_dir), str(clusters_dir), config)


@pytest.mark.parametrize("slices, max_rows", [(1, 2_000_000), (3, 16)])
def test_band_partitions_give_the_single_op_bytes(
    tmp_path: Path, slices: int, max_rows: int
) -> None:
    config = DedupConfig(hash_slices=slices, max_partition_rows=max_rows, max_bucket_pairs=5)
    sigs = _signatures(tmp_path, _corpus(), config)
    one = cluster_duplicates(sigs, str(tmp_path / "one"), config)
    fanned = _fan_out(sigs, tmp_path / "pairs", tmp_path / "fan", config)
    assert len(band_partition_keys(config)) == 16 * slices
    assert one.removed_exact >= 1 and one.removed_url == 1 and one.removed_near >= 10
    for name in ("clusters.parquet", "boilerplate.parquet"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "fan" / name).read_bytes()
    for key in band_partition_keys(config):
        outcome = check_pairs(pairs_uri(str(tmp_path / "pairs"), key), 66)
        assert outcome.passed, (key, outcome.description)
    bad = tmp_path / "bad.parquet"
    storage.write_table(pa.table({"a": [3, 5], "b": [2, 66]}), str(bad))
    outcome = check_pairs(str(bad), 66)
    assert not outcome.passed and "a < b: False; nodes in [0, 66): False" in outcome.description
    # a rerun of one partition writes the same bytes (no timings in the file)
    first = Path(pairs_uri(str(tmp_path / "pairs"), "b005-s000")).read_bytes()
    band_pairs(sigs, str(tmp_path / "unclustered"), pairs_uri(str(tmp_path / "again"), "b005-s000"),
               "b005-s000", config)  # fmt: skip
    assert Path(pairs_uri(str(tmp_path / "again"), "b005-s000")).read_bytes() == first
    assert (fanned.removed, fanned.verified_pairs, fanned.exact_pairs) == (
        one.removed, one.verified_pairs, one.exact_pairs
    )  # fmt: skip
    # each partition read only its own rows: the exact band's slices add up to the corpus
    sub = 1 if slices == 1 else 2  # ceil(66 documents / (3 slices x 16 rows))
    assert fanned.partitions == 16 * slices * sub and fanned.documents == 66
    exact_rows = 0
    for s in range(slices):
        table = pq.read_table(pairs_uri(str(tmp_path / "pairs"), f"exact-s{s:03d}"))
        stats = json.loads(table.schema.metadata[b"dedup.stats"])
        assert (
            stats["sub_slices"] == sub and stats["peak_partition_rows"] <= 66 // (slices * sub) + 20
        )
        exact_rows += stats["bucket_rows"]
    assert exact_rows == 66


def test_incremental_second_shard_matches_single_op(tmp_path: Path) -> None:
    config = DedupConfig()
    first, second = _corpus()
    sig_a, sig_b = _signatures(tmp_path, [first, second], config)
    for run in ("one", "fan"):
        out = tmp_path / run
        if run == "one":
            cluster_duplicates([sig_a], str(out), config)
            stats = cluster_duplicates([sig_a, sig_b], str(out), config)
        else:
            _fan_out([sig_a], tmp_path / "pairs", out, config)
            stats = _fan_out([sig_a, sig_b], tmp_path / "pairs", out, config)
        assert (stats.committed_shards, stats.fresh_shards) == (1, 1)
    for name in ("clusters.parquet", "changes.parquet", "state.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "fan" / name).read_bytes()


def test_stale_or_missing_pairs_are_refused(tmp_path: Path) -> None:
    config = DedupConfig()
    first, second = _corpus()
    sig_a, sig_b = _signatures(tmp_path, [first, second], config)
    pairs, out = tmp_path / "pairs", tmp_path / "clusters"
    _fan_out([sig_a], pairs, out, config)
    # a new shard: pairs computed before it (and before the first clustering) are stale
    with pytest.raises(DataError, match="earlier clustering.*materialize those dedup_pairs"):
        cluster_band_pairs([sig_a, sig_b], str(pairs), str(out), config)
    (pairs / "b003-s000" / "pairs.parquet").unlink()
    with pytest.raises(DataError, match=r"missing \['b003-s000'\]"):
        cluster_band_pairs([sig_a], str(pairs), str(out), config)


def test_unknown_partition_key_says_why(tmp_path: Path) -> None:
    # URL dedup off keeps the url partition (it then finds no pairs): the same partitions
    config = DedupConfig(url_dedup=False)
    assert band_partition_keys(config) == band_partition_keys(DedupConfig())
    assert band_partition_keys(config)[:3] == ["exact-s000", "url-s000", "b000-s000"]
    with pytest.raises(ConfigError, match=r"band partition 'b014-s000' does not exist"):
        band_pairs([], str(tmp_path), str(tmp_path / "p.parquet"), "b014-s000", config)
    with pytest.raises(ConfigError, match="hash_slices=0"):
        DedupConfig(hash_slices=0)
