"""The Dagster instance on Postgres (dagster-postgres) against a real server from Debian's packages.

The project's ``config/dagster.yaml`` plus the README's ``storage: postgres`` block; the
new-shard discovery sensor and the data stages run against it, and a second instance opened
from the same ``dagster.yaml`` (as the webserver and daemon do) sees the same runs,
partitions and materializations, which live in Postgres tables, not in SQLite files.
Skips cleanly where no PostgreSQL server is installed (``.ci/run`` installs one).
"""

from collections import Counter
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from foundation.partitions import band_partitions
from tests.helpers.pipelines import ASSETS, run_data_stages, run_discovery
from tests.servers.postgres_server import find_postgres_bin, postgres_server

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    find_postgres_bin() is None, reason="no PostgreSQL server (Debian package postgresql)"
)


def postgres_home(home: Path, db: dict) -> Path:
    """$DAGSTER_HOME with the project's instance settings and Postgres storage."""
    config = yaml.safe_load((ROOT / "config" / "dagster.yaml").read_text())
    config["storage"] = {"postgres": {"postgres_db": db}}
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return home


@pytest.mark.slow
def test_data_stages_and_discovery_on_a_postgres_instance(tmp_path: Path) -> None:
    import psycopg2

    with postgres_server() as db:
        home = postgres_home(tmp_path / "home", db)
        with DagsterInstance.from_config(str(home)) as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
            run_discovery(instance, tmp_path / "discovery")

        result = run_data_stages(
            str(tmp_path / "artifacts"), None, lambda: DagsterInstance.from_config(str(home))
        )
        assert all(result["lineage"][asset] for asset in ASSETS)
        assert all(kept for kept, _ in result["outcome"].values())

        # a second instance from the same dagster.yaml: what the webserver and daemon would see
        with DagsterInstance.from_config(str(home)) as reader:
            runs = reader.get_run_records(RunsFilter(statuses=[DagsterRunStatus.SUCCESS]))
            shards, bands = len(result["keys"]), len(band_partitions.get_partition_keys())
            per_shard = ("raw_shards", "filtered_shards", "minhash_signatures", "deduped_shards")
            once = ("quality_classifier", "toxicity_classifier", "dedup_clusters")
            expected = {**{f"{a}_job": shards for a in per_shard}, "dedup_pairs_job": bands,
                        **{f"{a}_job": 1 for a in once}}  # fmt: skip
            assert Counter(r.dagster_run.job_name for r in runs) == expected
            assert sorted(reader.get_dynamic_partitions("shards")) == sorted(result["keys"])
            for asset in ASSETS:
                assert reader.get_latest_materialization_event(AssetKey(asset)) is not None
        assert not list(home.glob("**/*.db"))  # nothing fell back to SQLite

        conn = psycopg2.connect(
            host=db["hostname"], port=db["port"], user=db["username"], dbname=db["db_name"]
        )
        with conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM runs")
            (run_rows,) = cur.fetchone()
            cur.execute(
                "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'"
            )
            (materializations,) = cur.fetchone()
        conn.close()
        assert run_rows == len(runs)
        assert materializations >= len(ASSETS)
