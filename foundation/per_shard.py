"""Per-shard assets from one factory: a run materializes one shard group or a batch of them.

A backfill of thousands of shard groups must not pay a run (a process, imports, a step
launch) per group: each per-shard asset carries ``BackfillPolicy.multi_run(n)``, so Dagster's
backfill runs ``n`` groups in one run (``PARTITIONS_PER_RUN``; ``build_definitions`` takes
another, and ``$PRETRAIN_PARTITIONS_PER_RUN`` sets it for ``dagster dev``). A run of one
partition (the Launchpad, a sensor) works the same way.

Each group keeps its own identity: the body returns a :class:`ShardOutput` per partition and
the factory records one materialization per partition with that partition's data version, its
code version and the data versions of the inputs it read (``dagster/input_data_version/…``, as
Dagster records them), so staleness in the UI and in the backfill schedule stays per group; each
check is evaluated per partition. A group whose input is bad (``DataError``, ``ConfigError``,
``StorageError``) is named in the run's failure, and the other groups of the batch are still
materialized; the run then fails without retries (it would fail again)::

    @shard_asset("minhash_signatures", deps={"filtered_shards": True},
                 code_version="minhash-v2", checks={"one_signature_per_document": False},
                 config=DedupRunConfig, group="dedup")
    def minhash_signatures(context, key, store, config) -> ShardOutput:
        ...                                  # one group: call the library, return its output
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    Failure,
    Output,
    multi_asset,
)

from foundation.metadata import Check, Made, to_metadata
from foundation.partitions import shard_partitions
from foundation.step_resources import NOT_RETRIED, STEP_RESOURCES, STEP_RETRY
from pretrain import identity
from pretrain.checks import CheckOutcome
from resources.storage import ArtifactStore

PARTITIONS_PER_RUN = 16  # shard groups one backfill run materializes (bench/control_plane_scale.py)
DATA_VERSION, CODE_VERSION = "dagster/data_version", "dagster/code_version"
INPUT_VERSION, INPUT_POINTER = "dagster/input_data_version/", "dagster/input_event_pointer/"


Body = Callable[[AssetExecutionContext, str, ArtifactStore, Any], Made]


def partitions_version(version: str) -> str:
    """What Dagster records as the input data version of one input partition."""
    return hashlib.sha256(version.encode()).hexdigest()


def own_group(store: ArtifactStore, group: str) -> identity.Look:
    """How a group's output checks its inputs: every input and its inputs in turn, except the
    other groups' signatures that ``dedup_clusters`` was made from. The clusters were checked
    against all of them when dedup ran; here, that this group's own signature is still the one
    they were made from. Without it every group re-read every group's chain: a backfill of
    ``n`` groups read n^2 identity files."""
    signatures = store.uri("minhash_signatures")
    mine = store.uri("minhash_signatures", group)
    return identity.Look(unchanged=lambda uri: uri.startswith(signatures) and uri != mine)


def provenance_tags(
    context: AssetExecutionContext, key: str, data_version: str, deps: Mapping[str, bool]
) -> dict[str, str]:
    """The tags Dagster records on a materialization of partition ``key``: its data version,
    its code version, and for each input (``deps``: asset -> partitioned like this one) the data
    version it read and where its record is."""
    code = context.assets_def.code_versions_by_key.get(context.asset_key) or "none"
    tags = {DATA_VERSION: data_version, CODE_VERSION: code}
    for dep, same_partition in deps.items():
        record = context.instance.get_latest_data_version_record(
            AssetKey(dep), partition_key=key if same_partition else None
        )
        version = (record.asset_materialization.tags or {}).get(DATA_VERSION) if record and (
            record.asset_materialization) else None  # fmt: skip
        if version is None:
            continue  # never materialized (an optional input left out): nothing recorded
        tags[INPUT_VERSION + dep] = partitions_version(version) if same_partition else version
        tags[INPUT_POINTER + dep] = str(record.storage_id) if record else "NULL"
    return tags


def _evaluation(asset: str, key: str, name: str, outcome: CheckOutcome, warn: bool) -> Any:
    return AssetCheckEvaluation(
        asset_key=AssetKey(asset),
        check_name=name,
        partition=key,
        passed=outcome.passed,
        severity=AssetCheckSeverity.WARN if warn else AssetCheckSeverity.ERROR,
        description=outcome.description,
        metadata=to_metadata(outcome.metadata),
    )


def _read_later_in_this_run(context: AssetExecutionContext) -> bool:
    """Whether an asset of this run depends on this one: then its step waits for this output
    (without it, Dagster skips the step). Dagster records the output as a materialization of
    each partition, one data version for the whole batch; the per-partition materializations
    yielded after it are the latest, and carry each group's identity. It is yielded only when
    every group succeeded: a failed group is never recorded as materialized."""
    layer = context.job_def.asset_layer
    in_run = set(context.run.asset_selection or layer.selected_asset_keys)
    return bool(set(layer.asset_graph.get(context.asset_key).child_keys) & in_run)


def _failure(name: str, failed: Mapping[str, str], groups: int) -> str:
    """The run's failure: a group's reason, or each failed group's in a batch."""
    if groups == 1:
        return next(iter(failed.values()))
    each = "; ".join(f"{key}: {why}" for key, why in sorted(failed.items()))
    return f"{len(failed)} of {groups} shard groups of {name} failed (the rest are done): {each}"


def shard_asset(
    name: str,
    *,
    deps: Mapping[str, bool],
    code_version: str,
    checks: Mapping[str, Check],
    config: type | None,
    group: str,
    body: Body,
) -> AssetsDefinition:
    """A per-shard asset whose ``body`` makes one shard group (``foundation.assets.stage_asset``
    with ``partitions=shard_partitions`` makes one). ``deps``: upstream asset -> whether it is
    partitioned by shard group too; ``config``: the run config class, or None."""

    def compute(context: AssetExecutionContext, store: ArtifactStore, launch: Any) -> Iterator:
        made: dict[str, Made] = {}
        failed: dict[str, str] = {}
        for key in context.partition_keys:
            try:
                made[key] = body(context, key, store, launch)
            except NOT_RETRIED as exc:
                failed[key] = f"{type(exc).__name__}: {exc}"
                context.log.error(f"{name}[{key}] failed: {failed[key]}")
        if not failed and _read_later_in_this_run(context):
            for key in made:  # Dagster records the output per partition, one version for
                context.add_asset_metadata({"batch_output": True}, partition_key=key)
            yield Output(None, output_name=name)  # all: each group's own record follows
        for key, output in made.items():
            yield AssetMaterialization(
                asset_key=name, partition=key, metadata=output.metadata,
                tags=provenance_tags(context, key, output.data_version.value, deps),
            )  # fmt: skip
            for check, outcome in output.checks.items():
                yield _evaluation(name, key, check, outcome, checks[check].warn)
        if failed:  # bad input or a store that refuses writes: a retry would fail again
            raise Failure(description=_failure(name, failed, len(context.partition_keys)),
                          allow_retries=False)  # fmt: skip

    if config is not None:  # Dagster reads the run config class from the signature

        def configured(
            context: AssetExecutionContext, config: Any, store: ArtifactStore
        ) -> Iterator:
            yield from compute(context, store, config)

        configured.__annotations__ = {
            "context": AssetExecutionContext, "config": config, "store": ArtifactStore,
        }  # fmt: skip
        fn: Callable[..., Iterator] = configured
    else:

        def plain(context: AssetExecutionContext, store: ArtifactStore) -> Iterator:
            yield from compute(context, store, None)

        plain.__annotations__ = {"context": AssetExecutionContext, "store": ArtifactStore}
        fn = plain
    fn.__name__, fn.__qualname__, fn.__doc__ = name, name, body.__doc__
    spec = AssetSpec(
        name, deps=list(deps), partitions_def=shard_partitions, code_version=code_version,
        group_name=group, description=body.__doc__, skippable=True,
    )  # fmt: skip
    return multi_asset(
        name=name,
        specs=[spec],
        check_specs=[
            AssetCheckSpec(c, asset=name, description=checks[c].description) for c in checks
        ],  # fmt: skip
        can_subset=True,  # a partition's materialization and checks are events, not outputs
        backfill_policy=BackfillPolicy.multi_run(PARTITIONS_PER_RUN),
        op_tags=STEP_RESOURCES.get(name),
        retry_policy=STEP_RETRY,
    )(fn)
