"""Turn library stats and configs into Dagster metadata (counts, config hash, code version)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    DataVersion,
    MetadataValue,
)

import pretrain
from pretrain import identity
from pretrain.checks import CheckOutcome
from pretrain.identity import Identity, config_hash
from resources.storage import ArtifactStore


@dataclass(frozen=True)
class Check:
    """An asset check: a failed one warns or errs; its description shows in the UI."""

    warn: bool = False
    description: str | None = None


ERROR, WARN = Check(), Check(warn=True)


@dataclass(frozen=True)
class Made:
    """What a stage made: the output's data version (its identity), its metadata, and each
    check's outcome."""

    data_version: DataVersion
    metadata: dict[str, Any]
    checks: Mapping[str, CheckOutcome] = field(default_factory=dict)


__all__ = [
    "Check",
    "Made",
    "begin_output",
    "cpu_seconds",
    "check_result",
    "config_hash",
    "finish_output",
    "stage_metadata",
    "to_metadata",
]


def begin_output(
    context: AssetExecutionContext,
    store: ArtifactStore,
    out_dir: str,
    config: Any,
    inputs: list[str],
    partition: str | None = None,
    look: identity.Look | None = None,
) -> Identity:
    """The identity this materialization's output will have (:mod:`pretrain.identity`).

    Refuses stale or incomplete inputs (``DataError`` naming what to re-materialize) and moves an
    output made with other settings to ``_versions/<asset>[/<partition>]/<version>`` before the
    stage overwrites it. Pass the identity to :func:`stage_metadata`, which records it and
    returns it as the Dagster data version (``versioned_result``). ``partition``: the one this
    output is of, in a run of several (default: the run's own); ``look``: how the inputs'
    freshness is read (:class:`pretrain.identity.Look`: reads shared, some inputs trusted)."""
    stage = context.asset_key.path[-1]
    code_version = context.assets_def.code_versions_by_key.get(context.asset_key) or "none"
    ident = identity.compute(stage, code_version, config, inputs, look)
    if partition is None and context.has_partition_key:
        partition = context.partition_key
    where = store.uri("_versions", stage, *([partition] if partition else []))
    archived = identity.prepare_output(out_dir, ident, where)
    if archived:
        context.log.warning(f"the output made with other settings was moved to {archived}")
    return ident


@contextmanager
def cpu_seconds() -> Iterator[dict[str, float]]:
    """CPU time of the block (this process), recorded as a stage's ``cpu_seconds`` metadata:
    the cleaning cost that data admission scales to a shard group's full size::

        with cpu_seconds() as cpu:
            stats = filter_shard(...)
        stage_metadata(stats, config, ident, cpu_seconds=cpu["seconds"])"""
    box: dict[str, float] = {}
    start = time.process_time()
    try:
        yield box
    finally:
        box["seconds"] = round(time.process_time() - start, 3)


def finish_output(out_dir: str, ident: Identity) -> DataVersion:
    """Record the identity of the complete output; returns it as the Dagster data version."""
    identity.write(out_dir, ident)
    return DataVersion(ident.version)


def to_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Scalars pass through; dicts and lists become JSON metadata; Markdown stays Markdown."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict | list | tuple):
            out[key] = MetadataValue.json(value)
        elif isinstance(value, str) and key.endswith("_md"):
            out[key] = MetadataValue.md(value)
        elif value is None:
            out[key] = MetadataValue.text("none")
        else:
            out[key] = value
    return out


def stage_metadata(
    stats: Any, config: Any, ident: Identity | None = None, **extra: Any
) -> dict[str, Any]:
    """Stats of one library call plus the config hash, the library version and, for a
    versioned output, its identity (version and input versions)."""
    values = dict(stats.as_metadata())
    values.update(extra)
    values["config_hash"] = config_hash(config)
    values["library_version"] = pretrain.__version__
    if ident is not None:
        values["identity"] = ident.version
        values["input_versions"] = dict(ident.inputs)
    return to_metadata(values)


def check_result(
    name: str, outcome: CheckOutcome, *, warn: bool = False, asset_key: str | None = None
) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=name,
        asset_key=asset_key,
        passed=outcome.passed,
        severity=AssetCheckSeverity.WARN if warn else AssetCheckSeverity.ERROR,
        description=outcome.description,
        metadata=to_metadata(outcome.metadata),
    )
