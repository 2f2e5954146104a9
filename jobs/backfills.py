"""One asset backfill over chosen partitions, submitted to the instance as the UI does.

    backfill_id = launch_asset_backfill(instance, AssetKey("proxy_runs"), experiment_partitions,
                                        ["mix-0a1b2c3d-s0", ...], tags={...}, title="search-…")

The daemon's backfill loop then runs the partitions (``dagster dev`` or ``make ui`` runs it).
Dagster has no public API to submit an asset backfill from Python (the webserver's GraphQL
mutation ``launchPartitionBackfill`` calls ``PartitionBackfill.from_asset_partitions`` and
``instance.add_backfill``; this builds the same backfill from the partitions alone, without the
asset graph, so an op or the CLI can call it); the private names are confined here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dagster import AssetKey, DagsterInstance, PartitionsDefinition


def launch_asset_backfill(
    instance: DagsterInstance,
    asset_key: AssetKey,
    partitions_def: PartitionsDefinition,
    partition_keys: Sequence[str],
    *,
    tags: Mapping[str, str],
    title: str,
) -> str:
    """Submit one backfill of ``asset_key`` over ``partition_keys``; returns its id."""
    from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id
    from dagster._time import get_current_timestamp

    subset = AssetGraphSubset(
        partitions_subsets_by_asset_key={
            asset_key: partitions_def.subset_with_partition_keys(list(partition_keys))
        }
    )
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=make_new_backfill_id(),
        backfill_timestamp=get_current_timestamp(),
        tags=dict(tags),
        dynamic_partitions_store=instance,
        asset_graph_subset=subset,
        title=title,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id
