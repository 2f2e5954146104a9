"""What Dagster recorded about a materialization's inputs, so a sensor never redoes current work.

Every materialization of an asset with a code version carries its data version
(``dagster/data_version``), its code version and the data version of each input it read
(``dagster/input_data_version/<asset>``; for a partitioned input, a hash of the data versions
of the input partitions it read). A partition is *current* when it was built by today's code
version from inputs whose data versions have not changed since: a sensor skips it, as the UI
shows it fresh::

    reports = latest_tags(instance, "eval_reports")           # partition → tags
    current_inputs(reports.get(key), code_version, {"checkpoints": partitions_data_version([v])})
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterEventType,
    DagsterInstance,
    EventLogEntry,
    EventLogRecord,
)

DATA_VERSION_TAG = "dagster/data_version"
CODE_VERSION_TAG = "dagster/code_version"
INPUT_TAG = "dagster/input_data_version/"

Tags = dict[str, str]


def partitions_data_version(versions: list[str]) -> str:
    """The input data version Dagster records for partitioned inputs: a hash of the data
    versions of the input partitions, in partition-key order (one partition here)."""
    return hashlib.sha256("".join(versions).encode()).hexdigest()


# Tags of materialization records already read, by (event storage, asset, storage id): a record
# never changes, so a process that evaluates a sensor or the backfill schedule tick after tick
# (the code server) deserializes each record once. Bounded: cleared when it grows past this.
_RECORD_TAGS: dict[tuple[str, str, int], Tags] = {}
RECORD_CACHE_MAX = 500_000


def storage_name(instance: DagsterInstance) -> str | None:
    """What names the instance's event storage (its class and config), or None for an
    ephemeral instance, whose records are not cached."""
    try:
        data = instance.get_ref().event_storage_data
    except Exception:  # an ephemeral instance has no ref
        return None
    if data is None:
        return None
    return f"{data.module_name}.{data.class_name}:{data.config_yaml}"


def latest_tags(
    instance: DagsterInstance,
    asset: str,
    page: int = 1000,
    partitions: Sequence[str] | None = None,
) -> dict[str, Tags]:
    """Partition → tags of its newest materialization; only the ``partitions`` named, when
    given (a sensor reads what it is deciding about). One query finds each partition's newest
    record (the instance's index), then only the records not read before in this process are
    read, ``page`` at a time: the first call's cost follows the number of partitions, a later
    one's the number of partitions materialized since."""
    found: dict[str, Tags] = {}
    if partitions is not None and not partitions:
        return found
    key = AssetKey(asset)
    newest = instance.get_latest_storage_id_by_partition(
        key, DagsterEventType.ASSET_MATERIALIZATION,
        partitions=set(partitions) if partitions is not None else None,
    )  # fmt: skip
    storage = storage_name(instance)
    missing = []
    for partition, storage_id in newest.items():
        cached = _RECORD_TAGS.get((storage, asset, storage_id)) if storage else None
        if cached is None:
            missing.append(storage_id)
        else:
            found[partition] = dict(cached)  # a caller may change its copy
    if len(_RECORD_TAGS) + len(missing) > RECORD_CACHE_MAX:
        _RECORD_TAGS.clear()
    missing.sort()
    for start in range(0, len(missing), page):
        chunk = missing[start : start + page]
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key, storage_ids=chunk), limit=len(chunk)
        ).records
        for record in records:
            event = record.event_log_entry.dagster_event
            if event is not None and event.partition is not None:
                tags = dict(event.step_materialization_data.materialization.tags or {})
                found[event.partition] = tags
                if storage:
                    _RECORD_TAGS[(storage, asset, record.storage_id)] = dict(tags)
    return found


def event_tags(event: EventLogEntry | None) -> Tags | None:
    """The tags of a materialization event (None: no event)."""
    if event is None or event.dagster_event is None:
        return None
    return dict(event.dagster_event.step_materialization_data.materialization.tags or {})


def data_version(event: EventLogEntry | None) -> str | None:
    """The data version recorded by a materialization event (None: never materialized)."""
    return (event_tags(event) or {}).get(DATA_VERSION_TAG)


def partition_input_versions(version: str | None) -> tuple[str, ...] | None:
    """What a materialization records for one input partition whose data version is
    ``version``: the version itself (a dependency without an ``In``) or the hash Dagster makes
    of the input partitions' versions (an input), so both count as "this very partition"."""
    if version is None:
        return None
    return (version, partitions_data_version([version]))


def current_inputs(
    tags: Tags | None,
    code_version: str | None,
    input_versions: dict[str, str | tuple[str, ...] | None],
) -> bool:
    """True when a materialization (its ``tags``) was made by ``code_version`` from inputs
    whose data versions are still ``input_versions`` (asset → the version now, or the values
    that stand for it; None: unknown, never counts as a change)."""
    if tags is None or tags.get(CODE_VERSION_TAG) != code_version:
        return False
    for asset, now in input_versions.items():
        recorded = tags.get(INPUT_TAG + asset)
        accepted = (now,) if isinstance(now, str) else now
        if recorded is not None and accepted is not None and recorded not in accepted:
            return False
    return True


def newest_versions(records: Sequence[EventLogRecord]) -> dict[str, str | None]:
    """Partition → the data version of its newest materialization in ``records`` (oldest
    first: a later record of a partition replaces an earlier one)."""
    newest: dict[str, str | None] = {}
    for record in records:
        event = record.event_log_entry
        if event.dagster_event and event.dagster_event.partition:
            newest.pop(event.dagster_event.partition, None)
            newest[event.dagster_event.partition] = data_version(event)
    return newest


def not_current(
    versions: dict[str, str | None],
    outputs: dict[str, Tags],
    code_version: str | None,
    input_asset: str,
    other_inputs: dict[str, str | tuple[str, ...] | None],
) -> tuple[dict[str, str | None], list[str]]:
    """Of the partitions of ``input_asset`` (``versions``: partition → its data version now),
    those whose same-key output (``outputs``: partition → tags of its latest materialization)
    is not current with it: partition → the input's data version; and the partitions that are
    current."""
    stale: dict[str, str | None] = {}
    current: list[str] = []
    for key, version in versions.items():
        # a materialization without a data version: what Dagster recorded for it as an input
        accepted = partition_input_versions(version) or (partitions_data_version([]), "INITIAL")
        inputs = {input_asset: accepted, **other_inputs}
        if current_inputs(outputs.get(key), code_version, inputs):
            current.append(key)
        else:
            stale[key] = version
    return stale, current
