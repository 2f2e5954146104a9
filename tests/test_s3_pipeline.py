"""The data stages through Dagster on S3 (moto_server) give the same lineage as a local run.

Runs ``ingest`` → ``quality`` → ``shard_pipeline`` → ``band_pairs`` → ``dedup`` →
``apply_dedup`` twice on the
same small embedded corpus — artifacts under a local folder, then under ``s3://campaign/run`` —
and checks the artifacts are in the bucket and that both runs materialized the same assets
and partitions and kept and rejected exactly the same documents for the same reasons.
"""

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import AssetKey, DagsterInstance

from pretrain import storage
from pretrain_assets.definitions import build_definitions
from pretrain_assets.partitions import band_partitions
from pretrain_assets.shards import plan_source, register_shards
from resources.storage import ArtifactStore
from tests.s3_server import moto_s3

ASSETS = ["raw_shards", "quality_classifier", "filtered_shards", "minhash_signatures",
          "dedup_pairs", "dedup_clusters", "deduped_shards"]  # fmt: skip


def run_data_stages(
    root: str, endpoint: str | None, open_instance: Callable[[], DagsterInstance] | None = None
) -> dict:
    """Materialize the data stages under ``root`` in a fresh instance (ephemeral by default)."""
    defs = build_definitions(artifact_root=root, s3_endpoint_url=endpoint)
    manifests = plan_source("embedded", max_shards=2, max_files_per_source=12)
    with (open_instance or DagsterInstance.ephemeral)() as instance:
        keys = register_shards(instance, ArtifactStore(root=root), manifests)

        def run(job: str, partition: str | None = None) -> None:
            result = defs.resolve_job_def(job).execute_in_process(
                instance=instance, partition_key=partition
            )
            assert result.success, (job, partition)

        for key in keys:
            run("ingest", key)
        run("quality")
        for key in keys:
            run("shard_pipeline", key)
        for band_key in band_partitions.get_partition_keys():
            run("band_pairs", band_key)
        run("dedup")
        for key in keys:
            run("apply_dedup", key)
        lineage = {
            asset: sorted(instance.get_materialized_partitions(AssetKey(asset)))
            or bool(instance.get_latest_materialization_event(AssetKey(asset)))
            for asset in ASSETS
        }
    outcome = {}
    for key in keys:
        kept = storage.read_table(storage.join(root, "deduped_shards", key, "documents.parquet"))
        dropped = pa.concat_tables(
            [
                storage.read_table(storage.join(root, stage, key, "rejects.parquet"))
                for stage in ("filtered_shards", "deduped_shards")
            ]
        )
        outcome[key] = (
            sorted(kept.column("id").to_pylist()),
            sorted(
                zip(
                    dropped.column("id").to_pylist(),
                    dropped.column("reason").to_pylist(),
                    strict=True,
                )
            ),
        )
    return {"keys": keys, "lineage": lineage, "outcome": outcome}


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
