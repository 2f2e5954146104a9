"""``latest_tags`` reads each materialization record once per process, and never mixes up two
instances whose records share storage ids (every new SQLite instance numbers from 1).

    .venv/bin/pytest -q tests/dagster/test_record_tags_cache.py
"""

from __future__ import annotations

from pathlib import Path

from dagster import AssetMaterialization, DagsterInstance

from foundation import data_versions
from foundation.data_versions import DATA_VERSION_TAG, latest_tags
from foundation.partitions import SHARD_PARTITIONS_NAME
from tests.helpers.checkpoints import sqlite_instance


def report(instance: DagsterInstance, shard: str, version: str) -> None:
    instance.add_dynamic_partitions(SHARD_PARTITIONS_NAME, [shard])
    instance.report_runless_asset_event(
        AssetMaterialization("raw_shards", partition=shard, tags={DATA_VERSION_TAG: version})
    )


def versions(instance: DagsterInstance) -> dict[str, str]:
    return {k: t[DATA_VERSION_TAG] for k, t in latest_tags(instance, "raw_shards").items()}


def test_a_second_read_fetches_only_new_records_and_sees_them(tmp_path: Path, monkeypatch) -> None:
    fetched: list[int] = []
    with sqlite_instance(tmp_path) as instance:
        real = instance.fetch_materializations

        def counting(records_filter, limit, **kwargs):
            fetched.append(len(records_filter.storage_ids or ()))
            return real(records_filter, limit, **kwargs)

        monkeypatch.setattr(instance, "fetch_materializations", counting)
        for i in range(5):
            report(instance, f"web-{i:04d}", "v1")
        assert versions(instance) == {f"web-{i:04d}": "v1" for i in range(5)}
        assert fetched == [5]
        report(instance, "web-0002", "v2")  # one partition remade
        assert versions(instance)["web-0002"] == "v2"
        assert fetched == [5, 1]  # only the new record was read
        assert versions(instance)["web-0002"] == "v2" and fetched == [5, 1]


def test_two_instances_with_the_same_storage_ids_keep_their_own_tags(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    with sqlite_instance(tmp_path / "a") as first, sqlite_instance(tmp_path / "b") as second:
        report(first, "web-0000", "first")
        report(second, "web-0000", "second")  # the same storage id in another database
        assert versions(first) == {"web-0000": "first"}
        assert versions(second) == {"web-0000": "second"}


def test_the_cache_is_cleared_before_it_outgrows_its_bound(tmp_path: Path, monkeypatch) -> None:
    old = {("elsewhere", "raw_shards", i): {} for i in range(3)}
    monkeypatch.setattr(data_versions, "_RECORD_TAGS", dict(old))
    monkeypatch.setattr(data_versions, "RECORD_CACHE_MAX", 4)
    with sqlite_instance(tmp_path) as instance:
        for i in range(5):
            report(instance, f"web-{i:04d}", "v1")
        assert len(versions(instance)) == 5
    assert not old.keys() & data_versions._RECORD_TAGS.keys()  # 3 + 5 > 4: cleared first
    assert len(data_versions._RECORD_TAGS) == 5
