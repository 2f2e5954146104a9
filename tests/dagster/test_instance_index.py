"""``foundation.instance_index`` answers as Dagster's whole reads do, reading only what is newer
after the first call in a process; wipes and deletions are seen (at the latest, at the next
whole read).

    .venv/bin/pytest -q tests/dagster/test_instance_index.py
"""

from __future__ import annotations

from pathlib import Path

from dagster import AssetKey, AssetMaterialization, DagsterInstance

from foundation import instance_index
from foundation.instance_index import dynamic_partitions, materialized_partitions
from tests.helpers.checkpoints import sqlite_instance


def made(instance: DagsterInstance, asset: str, *partitions: str) -> None:
    for p in partitions:
        instance.report_runless_asset_event(AssetMaterialization(asset, partition=p))


def spy(instance: DagsterInstance, monkeypatch, name: str) -> list[dict]:
    """The calls of the instance's real ``name``, with their keyword arguments."""
    calls: list[dict] = []
    real = getattr(instance, name)

    def recorded(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(instance, name, recorded)
    return calls


def test_materialized_partitions_reads_what_is_new_and_answers_as_dagster(
    tmp_path: Path, monkeypatch
) -> None:
    with sqlite_instance(tmp_path) as instance:
        calls = spy(instance, monkeypatch, "get_materialized_partitions")
        made(instance, "deduped_shards", "web-0000", "web-0001")
        assert materialized_partitions(instance, "deduped_shards") == {"web-0000", "web-0001"}
        assert calls == [{}]  # the first call reads whole
        assert materialized_partitions(instance, "deduped_shards") == {"web-0000", "web-0001"}
        assert len(calls) == 1  # nothing newer: nothing read
        made(instance, "deduped_shards", "web-0002", "web-0000")
        found = materialized_partitions(instance, "deduped_shards")
        assert found == {"web-0000", "web-0001", "web-0002"}
        assert found == instance.get_materialized_partitions(AssetKey("deduped_shards"))
        assert len(calls) == 3 and "after_cursor" in calls[1]  # only what was made since
        assert materialized_partitions(instance, "never_made") == set()


def test_a_wipe_is_seen_at_once(tmp_path: Path) -> None:
    with sqlite_instance(tmp_path) as instance:
        made(instance, "data_admission", "web-0000")
        assert materialized_partitions(instance, "data_admission") == {"web-0000"}
        instance.wipe_assets([AssetKey("data_admission")])
        assert materialized_partitions(instance, "data_admission") == set()
        made(instance, "data_admission", "web-0005")
        assert materialized_partitions(instance, "data_admission") == {"web-0005"}


def test_two_instances_keep_their_own_partitions(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    with sqlite_instance(tmp_path / "a") as first, sqlite_instance(tmp_path / "b") as second:
        made(first, "deduped_shards", "web-0000")
        made(second, "deduped_shards", "web-0009")  # the same storage ids, another database
        assert materialized_partitions(first, "deduped_shards") == {"web-0000"}
        assert materialized_partitions(second, "deduped_shards") == {"web-0009"}


def test_dynamic_partitions_reads_the_keys_added_since(tmp_path: Path, monkeypatch) -> None:
    with sqlite_instance(tmp_path) as instance:
        calls = spy(instance, monkeypatch, "get_paginated_dynamic_partitions")
        instance.add_dynamic_partitions("shards", ["web-0000", "web-0001"])
        assert dynamic_partitions(instance, "shards") == ["web-0000", "web-0001"]
        assert calls[-1]["cursor"] is None
        instance.add_dynamic_partitions("shards", ["web-0002"])
        assert dynamic_partitions(instance, "shards") == ["web-0000", "web-0001", "web-0002"]
        assert calls[-1]["cursor"] is not None  # only the keys after the last one read
        assert dynamic_partitions(instance, "shards") == instance.get_dynamic_partitions("shards")


def test_a_deleted_key_or_a_deleted_runs_partition_goes_at_the_next_whole_read(
    tmp_path: Path, monkeypatch
) -> None:
    with sqlite_instance(tmp_path) as instance:
        instance.add_dynamic_partitions("shards", ["web-0000", "web-0001"])
        assert dynamic_partitions(instance, "shards") == ["web-0000", "web-0001"]
        instance.delete_dynamic_partition("shards", "web-0000")
        monkeypatch.setattr(instance_index, "FULL_READ_S", 0.0)  # the whole read is due
        assert dynamic_partitions(instance, "shards") == ["web-0001"]
        made(instance, "deduped_shards", "web-0001")
        assert materialized_partitions(instance, "deduped_shards") == {"web-0001"}
