"""One asset backfill over chosen partitions, submitted to the instance as the UI does.

    backfill_id = launch_asset_backfill(instance, asset_graph, AssetKey("proxy_runs"),
                                        ["mix-0a1b2c3d-s0", ...], tags={...}, title="search-…")

The daemon's backfill loop then runs the partitions (``dagster dev`` or ``make ui`` runs it).
Dagster has no public API to submit an asset backfill from Python (the webserver's GraphQL
mutation ``launchPartitionBackfill`` calls ``PartitionBackfill.from_asset_partitions`` and
``instance.add_backfill``, which is what this does); the private names are confined here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import AssetKey, DagsterInstance


def launch_asset_backfill(
    instance: DagsterInstance,
    asset_graph: Any,
    asset_key: AssetKey,
    partition_keys: Sequence[str],
    *,
    tags: Mapping[str, str],
    title: str,
) -> str:
    """Submit one backfill of ``asset_key`` over ``partition_keys``; returns its id."""
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id
    from dagster._time import get_current_timestamp

    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(),
        asset_graph=asset_graph,
        partition_names=list(partition_keys),
        asset_selection=[asset_key],
        backfill_timestamp=get_current_timestamp(),
        tags=dict(tags),
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=title,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id
