"""New-shard discovery and the backfill schedule, against a real Dagster instance."""

import os
import time
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
)

from app.definitions import build_definitions
from pretrain.data.discovery import plan_new_shards
from pretrain.errors import ConfigError
from pretrain.filters.toxicity_model import VERSION
from pretrain_assets.filter import filter_code_version
from resources.sources import ShardSource
from resources.storage import ArtifactStore
from sensors.backfill_schedule import (
    CHAIN,
    batches,
    partitions_data_version,
    shard_backfill_schedule,
    stale_chain,
)
from sensors.shard_discovery import shard_discovery_sensor
from tests.helpers.pipelines import raw, run_discovery, write_jsonl


def test_plan_new_shards_skips_registered_files_and_continues_numbering() -> None:
    files = [raw(f"f{i}") for i in range(7)]
    manifests = plan_new_shards(
        files,
        registered_uris={"/data/f0.jsonl", "/data/f1.jsonl"},
        existing_keys=["web-0000", "web-0003", "news-0009"],
        prefix="web",
        files_per_shard=2,
    )
    assert [m.key for m in manifests] == ["web-0004", "web-0005"]
    assert [[f.uri for f in m.files] for m in manifests] == [
        ["/data/f2.jsonl", "/data/f3.jsonl"],
        ["/data/f4.jsonl", "/data/f5.jsonl"],
    ]  # f6 waits for a full group
    only = plan_new_shards(
        [raw("x")], registered_uris=set(), existing_keys=[], prefix="web", files_per_shard=4
    )
    assert [m.key for m in only] == ["web-0000"]  # a lone partial group is still work
    with pytest.raises(ConfigError, match="files_per_shard"):
        plan_new_shards(
            files, registered_uris=set(), existing_keys=[], prefix="web", files_per_shard=0
        )


def test_discovery_sensor_registers_new_shards_once(tmp_path: Path) -> None:
    with DagsterInstance.ephemeral() as instance:  # disposed: no global state leaks on
        run_discovery(instance, tmp_path)


def test_stale_chain_restarts_at_the_first_missing_or_outdated_asset() -> None:
    current = {
        "raw_shards": "raw-v1",
        "filtered_shards": "filter-v2",
        "minhash_signatures": "minhash-v2",
    }

    def tags(code: str, data: str, **inputs: str) -> dict[str, str]:
        # Dagster records a partitioned input as a hash of its partitions' data versions
        upstream = {
            f"dagster/input_data_version/{k}": v if k.endswith("_classifier")
            else partitions_data_version([v])
            for k, v in inputs.items()
        }  # fmt: skip
        return {"dagster/code_version": code, "dagster/data_version": data, **upstream}

    materialized = {
        "raw_shards": {s: tags("raw-v1", f"r{s}") for s in ("s0", "s1", "s2", "s4", "s5")},
        "filtered_shards": {
            "s0": tags("filter-v2", "f0", raw_shards="rs0", quality_classifier="q1"),
            "s1": tags("filter-v1", "f1", raw_shards="rs1", quality_classifier="q1"),
            # s4: read a raw shard that has been re-made with other settings since
            "s4": tags("filter-v2", "f4", raw_shards="old", quality_classifier="q1"),
            # s5: filtered with an older classifier
            "s5": tags("filter-v2", "f5", raw_shards="rs5", quality_classifier="q0"),
        },
        "minhash_signatures": {
            "s0": tags("minhash-v2", "m0", filtered_shards="f0"),
            "s1": tags("minhash-v2", "m1", filtered_shards="f1"),
            "s4": tags("minhash-v2", "m4", filtered_shards="f4"),
            "s5": tags("minhash-v2", "m5", filtered_shards="f5"),
        },
    }
    keys = ["s0", "s1", "s2", "s3", "s4", "s5"]
    plan = stale_chain(keys, materialized, current, {"quality_classifier": "q1"})
    assert plan == {
        "s1": CHAIN[1:], "s2": CHAIN[1:], "s3": CHAIN, "s4": CHAIN[1:], "s5": CHAIN[1:]
    }  # fmt: skip
    # signatures made from an older filtered shard are stale on their own
    materialized["minhash_signatures"]["s0"] = tags("minhash-v2", "m0", filtered_shards="f-old")
    assert stale_chain(["s0"], materialized, current, {"quality_classifier": "q1"}) == {
        "s0": CHAIN[2:]
    }
    # a toxicity classifier trained on new labels makes the shards filtered with the old one stale
    materialized["filtered_shards"]["s0"] = tags(
        "filter-v2", "f0", raw_shards="rs0", quality_classifier="q1", toxicity_classifier="t1"
    )
    materialized["minhash_signatures"]["s0"] = tags("minhash-v2", "m0", filtered_shards="f0")
    versions = {"quality_classifier": "q1", "toxicity_classifier": "t1"}
    assert stale_chain(["s0"], materialized, current, versions) == {}
    versions["toxicity_classifier"] = "t2"
    assert stale_chain(["s0"], materialized, current, versions) == {"s0": CHAIN[1:]}


def test_a_new_shipped_toxicity_model_makes_filtered_shards_stale(tmp_path: Path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    graph = defs.get_repository_def().asset_graph
    current = graph.get(AssetKey("filtered_shards")).code_version
    assert current == filter_code_version(VERSION) and VERSION in current
    assert filter_code_version("toxicity-v5") != current

    def tags(code: str) -> dict[str, str]:
        return {"dagster/code_version": code, "dagster/data_version": code}

    versions = {"raw_shards": "raw-v1", "filtered_shards": current, "minhash_signatures": "m-v2"}
    for older, stale in ((current, False), (filter_code_version("toxicity-v2"), True),
                         ("filter-v4+toxicity-v3", True)):  # fmt: skip
        materialized = {
            "raw_shards": {"s0": tags("raw-v1")},
            "filtered_shards": {"s0": tags(older)},
            "minhash_signatures": {"s0": tags("m-v2")},
        }
        plan = stale_chain(["s0"], materialized, versions)
        assert plan == ({"s0": CHAIN[1:]} if stale else {}), older


def test_backfill_schedule_waits_for_shards_and_the_classifier(tmp_path: Path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    (tmp_path / "home").mkdir()
    instance = DagsterInstance.local_temp(tempdir=str(tmp_path / "home"))  # real SQLite
    try:
        context = build_schedule_context(
            instance=instance, repository_def=defs.get_repository_def()
        )
        assert isinstance(shard_backfill_schedule(context), SkipReason)  # no shards yet
        instance.add_dynamic_partitions("shards", ["web-0000"])
        skip = shard_backfill_schedule(context)
        assert isinstance(skip, SkipReason) and "quality_classifier" in skip.skip_message
    finally:
        instance.dispose()


def test_stale_shards_share_runs_with_their_neighbours_of_the_same_chain() -> None:
    """Ten thousand stale shards are hundreds of runs: neighbours in the partitions' order (a
    partition range follows it) that need the same suffix of the chain share one, up to the
    backfill policy's partitions per run."""
    order = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"]
    plan = {"s0": CHAIN, "s1": CHAIN, "s2": CHAIN[1:], "s3": CHAIN[1:], "s5": CHAIN[1:],
            "s6": CHAIN[1:], "s7": CHAIN[1:]}  # fmt: skip
    assert batches(plan, order, 16) == [
        (CHAIN, ["s0", "s1"]), (CHAIN[1:], ["s2", "s3"]), (CHAIN[1:], ["s5", "s6", "s7"])
    ]  # fmt: skip
    assert batches(plan, order, 2) == [
        (CHAIN, ["s0", "s1"]), (CHAIN[1:], ["s2", "s3"]), (CHAIN[1:], ["s5", "s6"]),
        (CHAIN[1:], ["s7"]),
    ]  # fmt: skip
    assert [keys for _, keys in batches(plan, order, 1)] == [[k] for k in sorted(plan)]


def test_an_idle_discovery_tick_on_a_local_source_does_not_list_it(tmp_path: Path) -> None:
    """With the folders as the cursor stamped them, the tick ends without a listing: a file
    slipped in with the folder's time put back is not seen (no listing happened); once the
    folder's time moves, the next tick lists and registers it."""
    incoming = tmp_path / "incoming"
    for name in ("a", "b"):
        write_jsonl(incoming, name)
    past = time.time() - 60
    os.utime(incoming, (past, past))
    resources = {
        "store": ArtifactStore(root=str(tmp_path / "artifacts")),
        "shard_source": ShardSource(uri=str(incoming), source_name="web", files_per_shard=2),
    }
    with DagsterInstance.ephemeral() as instance:

        def tick(cursor: str | None) -> Any:
            return _discovery_tick(instance, resources, cursor)

        first = tick(None)
        assert [r.partition_key for r in first.run_requests] == ["web-0000"]
        idle = tick(first.cursor)
        assert isinstance(idle, SkipReason) and "unchanged since the last look" in idle.skip_message
        write_jsonl(incoming, "c")
        write_jsonl(incoming, "d")
        os.utime(incoming, (past, past))  # the folder's time as stamped: the tick cannot know
        assert isinstance(tick(first.cursor), SkipReason)
        os.utime(incoming, None)  # the time moves (as any new file moves it)
        later = tick(first.cursor)
        assert [r.partition_key for r in later.run_requests] == ["web-0001"]


def test_an_idle_discovery_tick_on_s3_is_one_request(tmp_path: Path) -> None:
    """An ``s3://`` source with nothing after the last file listed: one LIST request (a crawl
    of 40,000 files listed whole is 40 requests and 12.7 s against moto at 10,000 groups). A
    file whose name sorts before the last one waits for the hourly whole listing."""
    import gzip
    import json
    import re

    import boto3

    from pretrain.data.discovery import S3_FULL_LISTING_S
    from tests.servers.s3_server import moto_s3

    log = tmp_path / "moto.log"

    def put(name: str) -> None:
        body = gzip.compress((json.dumps({"text": f"document {name}"}) + "\n").encode())
        boto3.client("s3").put_object(Bucket="campaign", Key=f"crawl/{name}", Body=body)

    def answered() -> int:
        time.sleep(0.3)  # moto writes its access line after the response
        return len(re.findall(r'" [2-5]\d\d ', log.read_text(errors="replace")))

    with moto_s3(access_log=log), DagsterInstance.ephemeral() as instance:
        for name in ("b-000.jsonl.gz", "b-001.jsonl.gz"):
            put(name)
        resources = {
            "store": ArtifactStore(root=str(tmp_path / "artifacts")),
            "shard_source": ShardSource(
                uri="s3://campaign/crawl", source_name="web", files_per_shard=2
            ),  # fmt: skip
        }

        def tick(cursor: str | None) -> Any:
            return _discovery_tick(instance, resources, cursor)

        first = tick(None)
        assert [r.partition_key for r in first.run_requests] == ["web-0000"]
        before = answered()
        idle = tick(first.cursor)
        assert isinstance(idle, SkipReason) and "unchanged since the last look" in idle.skip_message
        assert answered() - before == 1  # one LIST after the last key
        put("a-000.jsonl.gz")  # sorts before the last file: found by the whole listing
        put("a-001.jsonl.gz")
        assert isinstance(tick(first.cursor), SkipReason)
        hour_ago = json.loads(first.cursor)
        hour_ago["listed_at"] -= S3_FULL_LISTING_S
        later = tick(json.dumps(hour_ago))
        assert [r.partition_key for r in later.run_requests] == ["web-0001"]
        put("c-000.jsonl.gz")  # sorts after the last file: the next look finds it at once
        put("c-001.jsonl.gz")
        assert [r.partition_key for r in tick(later.cursor).run_requests] == ["web-0002"]


def _discovery_tick(
    instance: DagsterInstance, resources: dict[str, Any], cursor: str | None
) -> Any:
    """One tick of the discovery sensor from ``cursor`` (a SkipReason or a SensorResult)."""
    with build_sensor_context(instance=instance, resources=resources, cursor=cursor) as context:
        return shard_discovery_sensor(context)
