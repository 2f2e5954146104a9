"""One asset backfill over chosen partitions, submitted to the instance as the UI does.

    backfill_id = launch_asset_backfill(instance, AssetKey("proxy_runs"), experiment_partitions,
                                        ["mix-0a1b2c3d-s0", ...], tags={...}, title="search-…")

The daemon's backfill loop then runs the partitions (``dagster dev`` or ``make ui`` runs it).
Dagster has no public API to submit an asset backfill from Python (the webserver's GraphQL
mutation ``launchPartitionBackfill`` calls ``PartitionBackfill.from_asset_partitions`` and
``instance.add_backfill``; this builds the same backfill from the partitions alone, without the
asset graph, so an op or the CLI can call it). The private Dagster names it needs are in
``foundation/dagster_internals.py`` with the project's other Dagster internals.
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
    from foundation.dagster_internals import submit_asset_backfill

    return submit_asset_backfill(
        instance, asset_key, partitions_def, partition_keys, tags=tags, title=title
    )
