"""The data stages through Dagster on S3 (moto_server) give the same lineage as a local run.

Runs ``ingest`` → ``quality`` → ``shard_pipeline`` → ``band_pairs`` → ``dedup`` →
``apply_dedup`` twice on the
same small embedded corpus — artifacts under a local folder, then under ``s3://campaign/run`` —
and checks the artifacts are in the bucket and that both runs materialized the same assets
and partitions and kept and rejected exactly the same documents for the same reasons.
"""

from pathlib import Path

import pytest

from pretrain import storage
from tests.helpers.pipelines import run_data_stages
from tests.servers.s3_server import moto_s3


@pytest.mark.slow
def test_data_stages_on_s3_match_the_local_run(tmp_path: Path) -> None:
    local = run_data_stages(str(tmp_path / "local"), None)
    with moto_s3() as endpoint:
        remote = run_data_stages("s3://campaign/run", endpoint)
        in_bucket = storage.list_files("s3://campaign/run")
    assert remote["lineage"] == local["lineage"]
    assert remote["outcome"] == local["outcome"]
    assert all(kept for kept, _ in local["outcome"].values())
    for key in local["keys"]:
        for path in (
            f"raw_shards/{key}/documents.parquet",
            f"filtered_shards/{key}/rejects.parquet",
            f"minhash_signatures/{key}/signatures.parquet",
            f"deduped_shards/{key}/documents.parquet",
        ):
            assert f"s3://campaign/run/{path}" in in_bucket
    assert "s3://campaign/run/dedup_clusters/clusters.parquet" in in_bucket
    assert "s3://campaign/run/dedup_pairs/b013-s000/pairs.parquet" in in_bucket
    assert "s3://campaign/run/quality_classifier/model.bin" in in_bucket
