"""``shard_backfill_schedule``: hourly, materialize missing or stale per-shard partitions.

For each ``shards`` partition it finds the first asset of the per-shard chain
``raw_shards → filtered_shards → minhash_signatures`` that was never materialized or was
materialized by an older ``code_version`` (the UI shows the same partitions as stale), and
requests one run for that asset and the rest of the chain. Global steps (``dedup``,
``apply_dedup``, ``corpus``) follow once the shards are current. Run keys carry the code
versions, so a tick never requests the same work twice.
"""

from collections.abc import Iterable

from dagster import (
    AssetKey,
    AssetSelection,
    DagsterInstance,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from jobs.partitions import shard_partitions

CHAIN = ("raw_shards", "filtered_shards", "minhash_signatures")
CODE_VERSION_TAG = "dagster/code_version"


def stale_chain(
    keys: Iterable[str],
    materialized: dict[str, dict[str, str | None]],
    current: dict[str, str | None],
) -> dict[str, tuple[str, ...]]:
    """Per shard, the suffix of CHAIN to rematerialize (shards that are current are absent).

    ``materialized[asset][shard]`` is the code version of the latest materialization.
    """
    plan: dict[str, tuple[str, ...]] = {}
    for key in keys:
        for i, asset in enumerate(CHAIN):
            done = materialized.get(asset, {})
            if key not in done or done[key] != current.get(asset):
                plan[key] = CHAIN[i:]
                break
    return plan


def latest_code_versions(
    instance: DagsterInstance, asset: str, page: int = 5000
) -> dict[str, str | None]:
    """Partition → code version of its newest materialization (newest records come first)."""
    versions: dict[str, str | None] = {}
    cursor = None
    while True:
        result = instance.fetch_materializations(AssetKey(asset), limit=page, cursor=cursor)
        for record in result.records:
            entry = record.event_log_entry
            partition = entry.dagster_event.partition if entry.dagster_event else None
            if partition is not None and partition not in versions:
                tags = entry.dagster_event.step_materialization_data.materialization.tags or {}
                versions[partition] = tags.get(CODE_VERSION_TAG)
        if not result.has_more:
            return versions
        cursor = result.cursor


@schedule(
    cron_schedule="0 * * * *",
    target=AssetSelection.assets(*CHAIN),
    default_status=DefaultScheduleStatus.STOPPED,
)
def shard_backfill_schedule(context: ScheduleEvaluationContext):
    instance = context.instance
    keys = instance.get_dynamic_partitions(shard_partitions.name)
    if not keys:
        return SkipReason("no shard partitions registered yet")
    if not instance.get_latest_materialization_event(AssetKey("quality_classifier")):
        return SkipReason("quality_classifier has never been materialized: run the `quality` job")
    current = {
        asset: context.repository_def.asset_graph.get(AssetKey(asset)).code_version
        for asset in CHAIN
    }
    plan = stale_chain(keys, {a: latest_code_versions(instance, a) for a in CHAIN}, current)
    if not plan:
        return SkipReason(f"all {len(keys)} shards are current")
    return [
        RunRequest(
            run_key=f"backfill-{key}-" + "-".join(f"{a}@{current[a]}" for a in chain),
            partition_key=key,
            asset_selection=[AssetKey(a) for a in chain],
        )
        for key, chain in sorted(plan.items())
    ]
