"""``shard_backfill_schedule``: hourly, materialize missing or stale per-shard partitions.

Staleness comes from Dagster itself: each materialization of the per-shard chain
``raw_shards → filtered_shards → minhash_signatures`` carries its code version
(``dagster/code_version``), its data version (the output's identity, see
:mod:`pretrain.identity`) and the data versions of its inputs
(``dagster/input_data_version/<asset>``). A partition is stale from the first asset of the chain
that was never materialized, was built by another code version, or read an input whose data
version has changed since (an upstream re-materialized with other settings, or a new
``quality_classifier`` or ``toxicity_classifier``) — the partitions the UI marks stale. One run
per batch of stale shards re-does that asset and the rest of the chain: stale shards that are
neighbours in the partition order and need the same suffix share a run, up to the assets'
backfill policy's partitions per run (``foundation.per_shard``), so ten thousand stale
shards are hundreds of runs, not ten thousand. The global steps (``dedup_clusters``,
``deduped_shards``, the corpus) follow once the shards are current. Run keys carry the versions, so a tick never
requests the same work twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from dagster import (
    AssetKey,
    AssetSelection,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from foundation.data_versions import (
    CODE_VERSION_TAG,
    DATA_VERSION_TAG,
    INPUT_TAG,
    Tags,
    latest_tags,
    partitions_data_version,
)
from foundation.data_versions import data_version as _data_version
from foundation.partitions import RANGE_END, RANGE_START, SHARD_PARTITIONS_NAME

CHAIN = ("raw_shards", "filtered_shards", "minhash_signatures")
UPSTREAM = {
    "filtered_shards": ("raw_shards", "quality_classifier", "toxicity_classifier"),
    "minhash_signatures": CHAIN[1:2],
}
# unpartitioned inputs of the chain (the classifiers): their data versions are looked up once
GLOBAL_INPUTS = tuple(dict.fromkeys(u for ups in UPSTREAM.values() for u in ups if u not in CHAIN))


def stale_chain(
    keys: Iterable[str],
    materialized: dict[str, dict[str, Tags]],
    current: dict[str, str | None],
    global_versions: dict[str, str | None] | None = None,
) -> dict[str, tuple[str, ...]]:
    """Per shard, the suffix of CHAIN to rematerialize (shards that are current are absent).

    ``materialized[asset][shard]`` holds the tags of the latest materialization; ``current`` the
    assets' code versions; ``global_versions`` the data versions of unpartitioned inputs.
    """
    plan: dict[str, tuple[str, ...]] = {}
    for key in keys:
        for i, asset in enumerate(CHAIN):
            tags = materialized.get(asset, {}).get(key)
            if tags is None or tags.get(CODE_VERSION_TAG) != current.get(asset):
                plan[key] = CHAIN[i:]
                break
            if any(
                _input_changed(tags, upstream, key, materialized, global_versions or {})
                for upstream in UPSTREAM.get(asset, ())
            ):
                plan[key] = CHAIN[i:]
                break
    return plan


def _input_changed(
    tags: Tags,
    upstream: str,
    key: str,
    materialized: dict[str, dict[str, Tags]],
    global_versions: dict[str, str | None],
) -> bool:
    recorded = tags.get(INPUT_TAG + upstream)
    if upstream in materialized:
        now = materialized[upstream].get(key, {}).get(DATA_VERSION_TAG)
        now = partitions_data_version([now]) if now is not None else None
    else:
        now = global_versions.get(upstream)
    return recorded is not None and now is not None and recorded != now


def batches(
    plan: dict[str, tuple[str, ...]], order: list[str], size: int
) -> list[tuple[tuple[str, ...], list[str]]]:
    """The stale shards of ``plan`` in runs: neighbours in ``order`` (the partitions' order,
    which a partition range follows) that need the same chain, at most ``size`` a run."""
    runs: list[tuple[tuple[str, ...], list[str]]] = []
    previous = None
    for position, key in enumerate(order):
        chain = plan.get(key)
        if chain is None:
            continue
        last = runs[-1] if runs else None
        if last and last[0] == chain and previous == position - 1 and len(last[1]) < size:
            last[1].append(key)
        else:
            runs.append((chain, [key]))
        previous = position
    return runs


def _run_key(keys: list[str], chain: tuple[str, ...], tags: dict[str, dict[str, Tags]]) -> str:
    """Idempotent per state: the versions the stale chains were decided on."""
    seen = "|".join(
        f"{k}:{a}:{tags.get(a, {}).get(k, {}).get(DATA_VERSION_TAG)}" for k in keys for a in CHAIN
    )
    span = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
    return f"backfill-{span}-{'-'.join(chain)}-{hashlib.sha256(seen.encode()).hexdigest()[:12]}"


def _request(keys: list[str], chain: tuple[str, ...], run_key: str) -> RunRequest:
    selection = [AssetKey(a) for a in chain]
    if len(keys) == 1:
        return RunRequest(run_key=run_key, partition_key=keys[0], asset_selection=selection)
    return RunRequest(run_key=run_key, asset_selection=selection,
                      tags={RANGE_START: keys[0], RANGE_END: keys[-1]})  # fmt: skip


@schedule(
    cron_schedule="0 * * * *",
    target=AssetSelection.assets(*CHAIN),
    default_status=DefaultScheduleStatus.STOPPED,
)
def shard_backfill_schedule(context: ScheduleEvaluationContext):
    instance = context.instance
    keys = instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME)
    if not keys:
        return SkipReason("no shard partitions registered yet")
    latest = {a: instance.get_latest_materialization_event(AssetKey(a)) for a in GLOBAL_INPUTS}
    if not latest["quality_classifier"]:
        return SkipReason(
            "quality_classifier has never been materialized: run the `quality_classifier` job"
        )
    current = {
        asset: context.repository_def.asset_graph.get(AssetKey(asset)).code_version
        for asset in CHAIN
    }
    globals_ = {asset: _data_version(event) for asset, event in latest.items()}
    tags = {a: latest_tags(instance, a) for a in CHAIN}
    plan = stale_chain(keys, tags, current, globals_)
    if not plan:
        return SkipReason(f"all {len(keys)} shards are current")
    policy = context.repository_def.asset_graph.get(AssetKey(CHAIN[0])).backfill_policy
    size = (policy.max_partitions_per_run if policy else None) or 1
    return [
        _request(batch, chain, _run_key(batch, chain, tags))
        for chain, batch in batches(plan, list(keys), size)
    ]
