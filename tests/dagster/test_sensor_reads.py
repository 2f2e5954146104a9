"""Every sensor's idle tick reads a bounded number of artifact-store files, whatever the size of
the campaign; the engine's ticks after a change read in proportion to the change.

Two campaigns of the same shape (``tests/helpers/campaign.py``: partitions and materializations
with data versions, checkpoints, experiments, the store's manifests and identity chains), 10
and 100 shard groups. Each sensor ticks once without a cursor, then with its cursor and nothing
new (idle), and the experiment and eval sensors once more after 5 new materializations. The
sizes of ``bench/control_plane_scale.py`` (1,000 and 10,000 groups) are measured there.

    .venv/bin/pytest -q tests/dagster/test_sensor_reads.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetMaterialization, DagsterInstance

from app.definitions import build_definitions
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from resources.sources import ShardSource
from resources.storage import ArtifactStore
from tests.helpers.campaign import Campaign, build, group_key
from tests.helpers.ticks import Counting, tick_every_sensor

IDLE_READS = 10  # the bound of issue 40, per idle tick
CHANGED = 5


def campaign_ticks(tmp_path: Path, groups: int) -> dict[str, Any]:
    (tmp_path / "home").mkdir()
    root, source = str(tmp_path / "artifacts"), str(tmp_path / "crawl")
    defs = build_definitions(artifact_root=root)
    graph = defs.resolve_asset_graph()
    versions = {k.to_user_string(): graph.get(k).code_version or "none"
                for k in graph.get_all_asset_keys()}  # fmt: skip
    campaign = Campaign(store_root=root, code_versions=versions)
    resources = {"store": ArtifactStore(root=root), "recovery": RecoveryThresholds(),
                 "metrics": WandbMetricsReader(run_root=f"{root}/runs", mode="offline"),
                 "shard_source": ShardSource(uri=source, source_name="web")}  # fmt: skip
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        build(instance, campaign, groups, source_root=source, checkpoints=20, experiments=10,
              min_runs=0)  # fmt: skip
        past = time.time() - 60  # a crawl written a while ago (just now, a look lists it)
        for folder, _, _ in os.walk(source):
            os.utime(folder, (past, past))

        def remade_groups() -> None:
            for i in range(CHANGED):
                for asset in ("deduped_shards", "proxy_pools"):
                    tags = {"dagster/data_version": campaign.versions[i][asset]}
                    instance.report_runless_asset_event(
                        AssetMaterialization(asset, partition=group_key(i), tags=tags)
                    )

        def new_checkpoints() -> None:
            keys = [f"b00-s{9_000_000 + i:09d}" for i in range(CHANGED)]
            instance.add_dynamic_partitions("checkpoints", keys)
            for key in keys:
                tags = {"dagster/data_version": key}
                instance.report_runless_asset_event(
                    AssetMaterialization("checkpoints", partition=key, tags=tags)
                )

        changed = {"experiment_sensor": remade_groups, "eval_sensor": new_checkpoints}
        with Counting() as counts:
            return tick_every_sensor(instance, defs, resources, counts, changed)


@pytest.fixture(scope="module")
def ticks(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    return {n: campaign_ticks(tmp_path_factory.mktemp(f"c{n}"), n) for n in (10, 100)}


def test_no_tick_raises(ticks: dict[int, dict[str, Any]]) -> None:
    errors = {(n, s, p): t["error"] for n, found in ticks.items() for s, phases in found.items()
              for p, t in phases.items() if "error" in t}  # fmt: skip
    assert errors == {}


def test_an_idle_tick_reads_at_most_a_few_files_at_any_size(
    ticks: dict[int, dict[str, Any]],
) -> None:
    small, large = ticks[10], ticks[100]
    assert set(small) == set(large) and len(small) == 7  # every sensor of the definitions
    for sensor in small:
        reads = (small[sensor]["idle"]["store"], large[sensor]["idle"]["store"])
        assert max(reads) <= IDLE_READS, (sensor, reads)
        assert reads[0] == reads[1], (sensor, reads)  # not one more at ten times the groups


def test_after_a_change_the_engine_reads_what_changed(ticks: dict[int, dict[str, Any]]) -> None:
    small, large = ticks[10]["experiment_sensor"], ticks[100]["experiment_sensor"]
    assert small["changed"]["store"] == large["changed"]["store"] <= 10 * CHANGED
    assert small["first"]["store"] < large["first"]["store"]  # a first look reads every group
    evals = ticks[100]["eval_sensor"]["changed"]
    assert evals["store"] <= CHANGED + IDLE_READS  # the new checkpoints, each looked at once
