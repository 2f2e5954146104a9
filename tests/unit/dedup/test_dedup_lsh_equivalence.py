"""Our band-partitioned LSH finds exactly the candidate pairs of datasketch's MinHashLSH.

The bucket files are read in 4 hash slices per band (``max_partition_rows`` set low), so the
test also proves that partitioning loses no pair.
"""

from pathlib import Path

import numpy as np
from datasketch import LeanMinHash, MinHashLSH

from pretrain import storage
from pretrain.data.harvest import discover_embedded
from pretrain.data.raw import build_raw_shard, plan_shards
from pretrain.dedup.buckets import ShardInput, candidate_pairs
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import compute_signatures


def test_candidate_pairs_equal_datasketch_lsh(tmp_path: Path) -> None:
    files = [f for f in discover_embedded(max_files_per_source=120) if f.source != "code"]
    (manifest,) = plan_shards(files, files_per_shard=None, max_shards=1, prefix="t")
    build_raw_shard(manifest, str(tmp_path / "raw"))
    config = DedupConfig(max_bucket_pairs=10**9, url_dedup=False)
    sig_uri = str(tmp_path / "sig" / "signatures.parquet")
    stats = compute_signatures(str(tmp_path / "raw" / "documents.parquet"), sig_uri, config)
    table = storage.read_table(sig_uri)
    bands, rows = config.band_rows

    small = DedupConfig(max_bucket_pairs=10**9, url_dedup=False, max_partition_rows=64)
    shard = ShardInput(uri=sig_uri, offset=0, num_rows=table.num_rows)
    found = candidate_pairs([shard], small)
    assert found.partitions == (bands + 1) * -(-table.num_rows // 64) and found.partitions > bands
    assert found.peak_partition_rows < table.num_rows  # one slice, not the whole band
    exact = {tuple(p) for p in found.exact.tolist()}
    ours = {tuple(p) for p in found.lsh.tolist()} | exact

    lsh = MinHashLSH(num_perm=config.num_perm, params=(bands, rows))
    signatures = table.column("minhash").to_pylist()
    # Documents without shingles are linked by exact hash only (their signature is all-max).
    shingled = [n for n, values in enumerate(signatures) if min(values) < 0xFFFFFFFF]
    assert len(shingled) == table.num_rows - stats.empty
    for node in shingled:
        values = np.array(signatures[node], np.uint64)
        lsh.insert(node, LeanMinHash(seed=config.seed, hashvalues=values, scheme="affine32"))
    theirs = set()
    for node in shingled:
        values = np.array(signatures[node], np.uint64)
        query = LeanMinHash(seed=config.seed, hashvalues=values, scheme="affine32")
        theirs |= {(min(node, o), max(node, o)) for o in lsh.query(query) if o != node}

    assert len(theirs) > 50  # licence files are real near-duplicates
    shingled_set = set(shingled)
    ours_lsh = {p for p in ours if p[0] in shingled_set and p[1] in shingled_set}
    # Exact pairs are reported once, as exact; each one also shares every LSH bucket.
    assert ours_lsh - theirs == set() and theirs - ours_lsh == set()
