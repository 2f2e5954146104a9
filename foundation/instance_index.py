"""What the instance's asset index says, read incrementally by a process that asks again and again.

A sensor is evaluated tick after tick in the same process (the code server). Dagster's
``get_materialized_partitions`` and ``get_dynamic_partitions`` return every key each time: 10,000
at a campaign's size, the first from a query that groups every materialization. These keep what
was read and ask only for what is newer::

    materialized_partitions(instance, "deduped_shards")   # a set, as Dagster's
    dynamic_partitions(instance, "shards")                 # a list in the order added, as Dagster's

- The asset's record (one query, the instance's index) gives the storage id of its newest
  materialization and the time it was last wiped. Nothing newer: the kept set. Something newer:
  ``get_materialized_partitions(after_cursor=…)`` adds the partitions made since. A wipe (or no
  record left): read whole.
- A record can also leave the index without a wipe (a deleted run takes its events with it),
  which nothing newer shows: the whole set is read again at least every ``FULL_READ_S``.
- Dynamic partitions: the keys added after the last one read (their row ids grow; one page
  query). A deleted key is seen at the next whole read, at least every ``FULL_READ_S``.

An ephemeral instance (no storage to name) is never kept: every call reads whole.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dagster import AssetKey, DagsterInstance

from foundation.data_versions import storage_name

FULL_READ_S = 600.0  # a whole read at least this often (a deleted run's materializations)


@dataclass(frozen=True)
class _Kept:
    partitions: frozenset[str]
    newest: int  # the storage id of the newest materialization read
    wiped: float | None
    read_at: float  # monotonic time of the last whole read


_KEPT: dict[tuple[str, str], _Kept] = {}


def materialized_partitions(instance: DagsterInstance, asset: str) -> set[str]:
    """The partitions of ``asset`` with a materialization (as
    ``instance.get_materialized_partitions``): after the first call in a process, one query of
    the asset's record, plus one for the partitions materialized since, if any."""
    key = AssetKey(asset)
    storage = storage_name(instance)
    if storage is None:
        return set(instance.get_materialized_partitions(key))
    records = instance.get_asset_records([key])
    entry = records[0].asset_entry if records else None
    newest = entry.last_materialization_storage_id if entry else None
    details = entry.asset_details if entry else None
    wiped = details.last_wipe_timestamp if details else None
    if newest is None:  # never materialized, or wiped since: nothing to keep
        _KEPT.pop((storage, asset), None)
        return set(instance.get_materialized_partitions(key))
    kept = _KEPT.get((storage, asset))
    now = time.monotonic()
    if kept is None or kept.wiped != wiped or now - kept.read_at >= FULL_READ_S:
        found = frozenset(instance.get_materialized_partitions(key))
        # a materialization made between the two queries is read again next time: harmless
        _KEPT[(storage, asset)] = _Kept(found, newest, wiped, now)
        return set(found)
    if newest <= kept.newest:
        return set(kept.partitions)
    added = instance.get_materialized_partitions(key, after_cursor=kept.newest)
    grown = kept.partitions | frozenset(added)
    _KEPT[(storage, asset)] = _Kept(grown, newest, wiped, kept.read_at)
    return set(grown)


@dataclass(frozen=True)
class _Keys:
    keys: tuple[str, ...]
    cursor: str  # Dagster's cursor after the last key read
    read_at: float


_KEYS: dict[tuple[str, str], _Keys] = {}
PAGE = 10_000


def dynamic_partitions(instance: DagsterInstance, name: str) -> list[str]:
    """The keys of the dynamic partitions ``name`` (as ``instance.get_dynamic_partitions``):
    after the first call in a process, one query for the keys added since."""
    storage = storage_name(instance)
    if storage is None:
        return list(instance.get_dynamic_partitions(name))
    kept = _KEYS.get((storage, name))
    now = time.monotonic()
    keys: list[str]
    cursor: str | None
    if kept is None or now - kept.read_at >= FULL_READ_S:  # a whole read
        keys, cursor, read_at = [], None, now
    else:
        keys, cursor, read_at = list(kept.keys), kept.cursor, kept.read_at
    while True:
        page = instance.get_paginated_dynamic_partitions(name, limit=PAGE, ascending=True,
                                                         cursor=cursor)  # fmt: skip
        keys.extend(page.results)
        cursor = page.cursor
        if not page.has_more:
            break
    _KEYS[(storage, name)] = _Keys(tuple(keys), cursor, read_at)
    return keys
