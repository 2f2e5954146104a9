"""A first look too large for one sensor tick goes in parts and ends where a whole look ends.

At 10,000 groups on S3 ``experiment_sensor``'s first look reads 58,000 objects (two minutes,
``bench/RESULTS.md``), and Dagster cancels a sensor evaluation after 60 s; so a look at more
than ``first_look_groups`` groups reads them a part a tick. Here a campaign of 30 groups
(``tests/helpers/campaign.py``) with stale pools is looked at whole, and in parts of 10: the
parts ask for nothing until the last, which asks for what the whole look asks for; what is
materialized while the parts are read is looked at on the next tick.

    .venv/bin/pytest -q tests/dagster/test_first_look_parts.py
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from dagster import AssetMaterialization, DagsterInstance, SensorResult, build_sensor_context

from app.definitions import build_definitions
from pretrain import identity
from pretrain.experiments.admission import AdmissionConfig
from resources.storage import ArtifactStore
from sensors.experiments import experiment_sensor_for
from tests.helpers.campaign import Campaign, build, group_key
from tests.helpers.ticks import Counting

GROUPS, PART = 30, 10


def _stale(campaign: Campaign, instance: DagsterInstance, i: int) -> None:
    """Group ``i``'s deduplicated documents remade with other content: its pools are stale."""
    uri = campaign.uri("deduped_shards", group_key(i))
    made = identity.read(uri)
    assert made is not None
    identity.write(uri, dataclasses.replace(made, version=f"remade-{i}"))
    tags = {"dagster/data_version": f"remade-{i}"}
    instance.report_runless_asset_event(
        AssetMaterialization("deduped_shards", partition=group_key(i), tags=tags)
    )


def test_a_first_look_in_parts_asks_what_a_whole_look_asks(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    root = str(tmp_path / "artifacts")
    defs = build_definitions(artifact_root=root)
    graph = defs.resolve_asset_graph()
    versions = {k.to_user_string(): graph.get(k).code_version or "none"
                for k in graph.get_all_asset_keys()}  # fmt: skip
    campaign = Campaign(store_root=root, code_versions=versions)
    repo = defs.get_repository_def()
    store = ArtifactStore(root=root)
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        build(instance, campaign, GROUPS, source_root=str(tmp_path / "crawl"), checkpoints=5,
              experiments=5, min_runs=0)  # fmt: skip
        for i in (3, 17, 25):
            _stale(campaign, instance, i)

        def tick(sensor: Any, cursor: str | None) -> tuple[Any, int]:
            with build_sensor_context(instance=instance, repository_def=repo, cursor=cursor,
                                      resources={"store": store}) as context:  # fmt: skip
                with Counting() as counts:
                    found = sensor(context)  # as the daemon calls it: a SkipReason or a result
                return found, counts.store

        whole, whole_reads = tick(experiment_sensor_for(AdmissionConfig()), None)
        asked = _asked(whole)
        assert ("proxy_pools_job", group_key(17)) in asked, asked  # its pools are stale

        parted = experiment_sensor_for(AdmissionConfig(), first_look_groups=PART)
        cursor, reads = None, []
        for _ in range(GROUPS // PART - 1):
            part, n = tick(parted, cursor)
            assert not part.run_requests and "first look" in part.skip_reason.skip_message
            cursor, reads = part.cursor, [*reads, n]
            if len(reads) == 1:  # remade while the parts are read, behind the look
                _stale(campaign, instance, 0)
        last, n = tick(parted, cursor)
        reads.append(n)
        assert _asked(last) == asked
        assert json.loads(last.cursor)["stale_pools"] == json.loads(whole.cursor)["stale_pools"]
        assert max(reads) < whole_reads  # each part reads a part of the groups' files
        following, _ = tick(parted, last.cursor)  # the next tick sees what was remade meanwhile
        assert isinstance(following, SensorResult)
        assert ("proxy_pools_job", group_key(0)) in _asked(following)


def _asked(result: Any) -> list[tuple[str, str | None]]:
    return sorted((r.job_name, r.partition_key) for r in result.run_requests or [])
