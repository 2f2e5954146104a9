"""Our polars band-bucket LSH finds exactly the candidate pairs of datasketch's MinHashLSH."""

from pathlib import Path

import numpy as np
import polars as pl
from datasketch import LeanMinHash, MinHashLSH

from pretrain import storage
from pretrain.data.harvest import discover_embedded
from pretrain.data.raw import build_raw_shard, plan_shards
from pretrain.dedup.clusters import _candidate_edges
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import compute_signatures


def test_candidate_pairs_equal_datasketch_lsh(tmp_path: Path) -> None:
    files = [f for f in discover_embedded(max_files_per_source=120) if f.source != "code"]
    (manifest,) = plan_shards(files, files_per_shard=None, max_shards=1, prefix="t")
    build_raw_shard(manifest, str(tmp_path / "raw"))
    config = DedupConfig()
    sig_uri = str(tmp_path / "signatures.parquet")
    compute_signatures(str(tmp_path / "raw" / "documents.parquet"), sig_uri, config)
    table = storage.read_table(sig_uri)
    bands, rows = config.band_rows

    frame = pl.from_arrow(table.drop_columns(["minhash"])).with_row_index("node")
    ours = {tuple(p) for p in _candidate_edges(frame, bands, max_bucket_pairs=10**9).tolist()}

    lsh = MinHashLSH(num_perm=config.num_perm, params=(bands, rows))
    signatures = table.column("minhash").to_pylist()
    for node, values in enumerate(signatures):
        lsh.insert(
            node,
            LeanMinHash(
                seed=config.seed, hashvalues=np.array(values, np.uint64), scheme="affine32"
            ),
        )
    theirs = set()
    for node, values in enumerate(signatures):
        query = LeanMinHash(
            seed=config.seed, hashvalues=np.array(values, np.uint64), scheme="affine32"
        )
        theirs |= {(min(node, o), max(node, o)) for o in lsh.query(query) if o != node}

    assert len(theirs) > 50  # licence files are real near-duplicates
    assert ours == theirs
