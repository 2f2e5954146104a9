"""Every private Dagster name the project uses, in this one module (the adapter).

Dagster has no public API for an executor that hands steps to another system, nor for running
one step in a process that is already warm: its own executors (dagster-k8s, dagster-docker,
dagster-celery) and dagster-ray import the same internals. Our Ray actor executor
(``executors/ray_executor.py``) and its step pool (``executors/ray_pool.py``) need them, and get them
only from here. Pinned to Dagster ``PINNED_DAGSTER``; ``SHAPES`` records the shape of every
name below as that version has it, and ``tests/dagster/test_dagster_internals.py`` fails, naming the
name that moved, when the installed Dagster differs (docs/UPGRADING.md: how to upgrade).

Private names (``dagster._…``), why each is needed, and the public API checked instead:

- ``dagster._core.executor.step_delegating.StepDelegatingExecutor``, ``StepHandler``,
  ``StepHandlerContext``, ``CheckStepHealthResult``: the executor that plans, launches,
  health-checks and retries steps run elsewhere, and the interface our ``ActorStepHandler``
  implements. Public instead: ``dagster.executor`` + ``dagster.Executor`` would mean writing
  the whole orchestration loop (step plan, event polling, retries, concurrency limits)
  ourselves against ``Executor.execute(plan_context, execution_plan)``, whose two arguments
  are themselves private types; the public ``dagster.multiprocess_executor`` runs steps on
  this machine only.
- ``dagster._core.execution.retries.RetryMode`` and ``get_retries_config``: the executor's
  ``retries`` setting and its config field, as every Dagster executor takes them. Public
  instead: none (``dagster.RetryPolicy`` is the per-op policy, which the assets use as well).
- ``dagster._core.execution.tags.get_tag_concurrency_limits_config``: the config field of
  ``tag_concurrency_limits`` that the step-delegating executor reads. Public instead: none; a
  copy of the schema could drift from what the executor parses.
- ``dagster._core.events.EngineEventData``: metadata on the engine events that say which Ray
  actor ran a step. Public instead: ``DagsterInstance.report_engine_event`` takes it (or
  nothing, losing the metadata); ``context.log`` exists only inside an op.
- ``dagster._grpc.types.ExecuteStepArgs``: what the executor serializes for a step (run id,
  step key, known state for retries, instance ref); the worker reads it back with its type
  checked. Public instead: ``dagster.deserialize_value`` without a type would accept any
  serialized value. Its ``known_state`` (``dagster._core.execution.plan.state``:
  ``KnownExecutionState.get_retry_state``, ``RetryState.get_attempt_count``) numbers a
  step's attempts, so a retried step is told apart from its first launch; no public view.
- ``dagster._cli.api._execute_step_command_body``: the body of ``dagster api execute_step``,
  run inside the warm actor. Public instead: the ``dagster api execute_step`` command (a new
  process per step: what dagster-ray does, about 6 s per step here,
  ``bench/ray_step_overhead.py``) and ``dagster.execute_job`` (starts a new run, not one step
  of an existing one).

- ``dagster._core.definitions.assets.graph.asset_graph_subset.AssetGraphSubset``,
  ``dagster._core.execution.backfill.PartitionBackfill`` (``from_asset_graph_subset``) and
  ``dagster._core.utils.make_new_backfill_id``: one asset backfill over chosen partitions,
  submitted to the instance as the UI does (``foundation/backfills.py``, for the experiment
  searches). Public instead: none from Python; the webserver's GraphQL mutation
  ``launchPartitionBackfill`` builds the same object and needs a running webserver. The
  backfill's timestamp is ``time.time()`` (what ``dagster._time.get_current_timestamp``
  returns outside Dagster's own tests).

- ``dagster._core.storage.defs_state.base._current_storage`` (and the public-looking
  ``DefsStateStorage.get``): the definitions-state storage that entering a ``DagsterInstance``
  puts in a context variable and loading ``Definitions`` reads; the tests clear one left behind
  (``tests/conftest.py``, ``clear_defs_state_storage``). Public instead: none; the context
  manager ``set_defs_state_storage`` (also private) only sets it for a block.

Public classes whose undocumented members we call (no ``@public`` in 1.13.27): the
``DagsterEvent.step_worker_starting`` and ``DagsterEvent.engine_event`` constructors (the
events every step handler yields), ``DagsterInstance.from_ref``,
``DagsterInstance.report_engine_event``, ``DagsterInstance.add_backfill`` and
``PartitionsDefinition.subset_with_partition_keys``. Top-level but undocumented:
``dagster.serialize_value`` / ``dagster.deserialize_value`` (re-exported from
``dagster_shared.serdes``). They are in ``SHAPES`` too.

Only ``jobs/`` (and ``tests/conftest.py``) use this module; importing it imports Dagster (never
ray or dagster-ray).
``executors/ray_pool.py`` and ``foundation/backfills.py`` import it where they need it, not at import.
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._cli.api import _execute_step_command_body
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.events import EngineEventData
from dagster._core.execution.backfill import PartitionBackfill
from dagster._core.execution.retries import RetryMode, get_retries_config
from dagster._core.execution.tags import get_tag_concurrency_limits_config
from dagster._core.executor.step_delegating import (
    CheckStepHealthResult,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
)
from dagster._core.storage.defs_state.base import DefsStateStorage, _current_storage
from dagster._core.utils import make_new_backfill_id
from dagster._grpc.types import ExecuteStepArgs

__all__ = [
    "CheckStepHealthResult",
    "RetryMode",
    "StepDelegatingExecutor",
    "StepHandler",
    "StepHandlerContext",
    "clear_defs_state_storage",
    "engine_event",
    "get_retries_config",
    "get_tag_concurrency_limits_config",
    "instance_for_step",
    "report_step_engine_event",
    "run_step_in_process",
    "step_args_from_json",
    "step_args_to_json",
    "step_attempt",
    "step_worker_starting",
    "submit_asset_backfill",
]

PINNED_DAGSTER = "1.13.27"
UPGRADE_NOTES = "docs/UPGRADING.md"

# name -> its shape in PINNED_DAGSTER (see shape_of): a function's parameters (``=`` marks a
# default), ``property``, ``field`` (a record's), ``class`` with its abstract methods
SHAPES: dict[str, str] = {
    "dagster._cli.api._execute_step_command_body": "function (args, instance, dagster_run)",
    "dagster._grpc.types.ExecuteStepArgs": (
        "class (job_origin, run_id, step_keys_to_execute, instance_ref=, retry_mode=,"
        " known_state=, should_verify_step=, print_serialized_events=)"
    ),
    "dagster._grpc.types.ExecuteStepArgs.run_id": "field",
    "dagster._grpc.types.ExecuteStepArgs.step_keys_to_execute": "field",
    "dagster._grpc.types.ExecuteStepArgs.instance_ref": "field",
    "dagster._grpc.types.ExecuteStepArgs.known_state": "field",
    "dagster._core.execution.plan.state.KnownExecutionState.get_retry_state": "function (self)",
    "dagster._core.execution.plan.state.RetryState.get_attempt_count": "function (self, key)",
    "dagster._core.events.EngineEventData": (
        "class (metadata=, error=, marker_start=, marker_end=)"
    ),
    "dagster._core.execution.retries.RetryMode.from_config": "function (config_value)",
    "dagster._core.execution.retries.get_retries_config": "function ()",
    "dagster._core.execution.tags.get_tag_concurrency_limits_config": "function ()",
    "dagster._core.executor.step_delegating.StepDelegatingExecutor": (
        "class (step_handler, retries, sleep_seconds=, check_step_health_interval_seconds=,"
        " max_concurrent=, tag_concurrency_limits=, should_verify_step=, step_dependency_config=)"
    ),
    "dagster._core.executor.step_delegating.StepHandler": (
        "class () abstract: check_step_health, launch_step, name, terminate_step"
    ),
    "dagster._core.executor.step_delegating.StepHandler.launch_step": (
        "function (self, step_handler_context)"
    ),
    "dagster._core.executor.step_delegating.StepHandler.check_step_health": (
        "function (self, step_handler_context)"
    ),
    "dagster._core.executor.step_delegating.StepHandler.terminate_step": (
        "function (self, step_handler_context)"
    ),
    "dagster._core.executor.step_delegating.StepHandlerContext.execute_step_args": "property",
    "dagster._core.executor.step_delegating.StepHandlerContext.step_tags": "property",
    "dagster._core.executor.step_delegating.StepHandlerContext.dagster_run": "property",
    "dagster._core.executor.step_delegating.StepHandlerContext.get_step_context": (
        "function (self, step_key)"
    ),
    "dagster._core.executor.step_delegating.CheckStepHealthResult.healthy": "function ()",
    "dagster._core.executor.step_delegating.CheckStepHealthResult.unhealthy": "function (reason)",
    "dagster.DagsterEvent.step_worker_starting": "function (step_context, message, metadata)",
    "dagster.DagsterEvent.engine_event": "function (plan_context, message, event_specific_data=)",
    "dagster.DagsterInstance.from_ref": "function (instance_ref)",
    "dagster.DagsterInstance.report_engine_event": (
        "function (self, message, dagster_run=, engine_event_data=, cls=, step_key=,"
        " job_name=, run_id=)"
    ),
    "dagster._core.definitions.assets.graph.asset_graph_subset.AssetGraphSubset": (
        "class (partitions_subsets_by_asset_key=, non_partitioned_asset_keys=)"
    ),
    "dagster._core.execution.backfill.PartitionBackfill.from_asset_graph_subset": (
        "function (backfill_id, backfill_timestamp, tags, dynamic_partitions_store,"
        " asset_graph_subset, title, description, run_config)"
    ),
    "dagster._core.execution.backfill.PartitionBackfill.backfill_id": "field",
    "dagster._core.utils.make_new_backfill_id": "function ()",
    "dagster.DagsterInstance.add_backfill": "function (self, partition_backfill)",
    "dagster.PartitionsDefinition.subset_with_partition_keys": "function (self, partition_keys)",
    "dagster.serialize_value": "function (val, whitelist_map=, **json_kwargs)",
    "dagster.deserialize_value": "function (val, as_type=, whitelist_map=)",
    "dagster._core.storage.defs_state.base._current_storage": "value ContextVar",
    "dagster._core.storage.defs_state.base.DefsStateStorage.get": "function ()",
}


def clear_defs_state_storage() -> bool:
    """Clear the definitions-state storage an entered ``DagsterInstance`` left in this context;
    True when there was one (``tests/conftest.py`` clears what a test leaves behind)."""
    if DefsStateStorage.get() is None:
        return False
    _current_storage.set(None)
    return True


# -- what executors/ray_executor.py and executors/ray_pool.py call ------------------------------------------


def step_args_to_json(args: ExecuteStepArgs) -> str:
    """A step's execution arguments as the JSON the pool sends to a worker actor."""
    return dg.serialize_value(args)


def step_args_from_json(args_json: str) -> ExecuteStepArgs:
    """The step's execution arguments back (a value of another type is refused)."""
    return dg.deserialize_value(args_json, ExecuteStepArgs)


def run_step_in_process(
    args: ExecuteStepArgs, instance: dg.DagsterInstance, run: dg.DagsterRun
) -> None:
    """What ``dagster api execute_step`` does for ``args``, in this process: the step's events
    go to ``instance``."""
    for _ in _execute_step_command_body(args, instance, run):
        pass


def step_attempt(args: ExecuteStepArgs, step_key: str) -> int:
    """How many times ``step_key`` was tried before this launch (0 on the first)."""
    known = args.known_state
    return known.get_retry_state().get_attempt_count(step_key) if known else 0


def instance_for_step(args: ExecuteStepArgs) -> dg.DagsterInstance:
    """The Dagster instance the step's run lives in (from the ref the executor sent)."""
    if args.instance_ref is None:
        raise RuntimeError(f"run {args.run_id}: the step arrived without an instance ref")
    return dg.DagsterInstance.from_ref(args.instance_ref)


def report_step_engine_event(
    instance: dg.DagsterInstance,
    run: dg.DagsterRun,
    step_key: str | None,
    message: str,
    metadata: Mapping[str, Any],
) -> None:
    """An engine event with metadata on ``step_key`` of ``run``, written to ``instance``."""
    instance.report_engine_event(
        message, run, EngineEventData(metadata=dict(metadata)), step_key=step_key
    )


def step_worker_starting(
    context: StepHandlerContext, step_key: str, message: str, metadata: Mapping[str, Any]
) -> dg.DagsterEvent:
    """The STEP_WORKER_STARTING event a step handler yields when it launches ``step_key``."""
    return dg.DagsterEvent.step_worker_starting(
        context.get_step_context(step_key), message=message, metadata=dict(metadata)
    )


def engine_event(context: StepHandlerContext, step_key: str, message: str) -> dg.DagsterEvent:
    return dg.DagsterEvent.engine_event(
        context.get_step_context(step_key), message=message, event_specific_data=EngineEventData()
    )


def submit_asset_backfill(
    instance: dg.DagsterInstance,
    asset_key: dg.AssetKey,
    partitions_def: dg.PartitionsDefinition,
    partition_keys: Sequence[str],
    *,
    tags: Mapping[str, str],
    title: str,
) -> str:
    """One backfill of ``asset_key`` over ``partition_keys`` added to ``instance`` (the
    daemon's backfill loop runs it); returns its id."""
    # mypy reads the __hash__ that AssetGraphSubset (a NamedTuple) assigns as a required field
    subset = AssetGraphSubset(  # type: ignore[call-arg]
        partitions_subsets_by_asset_key={
            asset_key: partitions_def.subset_with_partition_keys(list(partition_keys))
        }
    )
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=make_new_backfill_id(),
        backfill_timestamp=time.time(),
        tags=dict(tags),
        dynamic_partitions_store=instance,
        asset_graph_subset=subset,
        title=title,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


# -- the recorded shapes against the installed Dagster --------------------------------------------


def _parameters(func: Any) -> str:
    parts = []
    star_done = False
    for p in inspect.signature(func).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star_done:
                parts.append("*")
                star_done = True
            parts.append(p.name + ("=" if p.default is not p.empty else ""))
    return "(" + ", ".join(parts) + ")"


def shape_of(owner: Any, attribute: str) -> str:
    """The shape of ``owner.attribute`` as ``SHAPES`` records it."""
    static = inspect.getattr_static(owner, attribute)
    if isinstance(static, property):
        return "property"
    if type(static).__name__ == "_tuplegetter":  # a NamedTuple / @record field
        return "field"
    value = getattr(owner, attribute)
    if inspect.isclass(value):
        abstract = sorted(getattr(value, "__abstractmethods__", ()))
        return f"class {_parameters(value)}" + (
            f" abstract: {', '.join(abstract)}" if abstract else ""
        )
    if callable(value):
        return f"function {_parameters(value)}"
    return f"value {type(value).__name__}"


def resolve(name: str) -> tuple[Any, str]:
    """The owner (module or class) of a dotted name and the attribute's own name; raises
    LookupError when a part of it is gone."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:-1]:
            if not hasattr(owner, part):
                raise LookupError(f"{'.'.join(parts[:cut])} has no {part}")
            owner = getattr(owner, part)
        if not hasattr(owner, parts[-1]):
            raise LookupError(f"{'.'.join(parts[:-1])} has no {parts[-1]}")
        return owner, parts[-1]
    raise LookupError(f"no module of {name} imports")


def installed_shapes(names: Iterable[str] = SHAPES) -> dict[str, str]:
    """Each name's shape in the installed Dagster (``missing: why`` when it is gone)."""
    found = {}
    for name in names:
        try:
            found[name] = shape_of(*resolve(name))
        except LookupError as exc:
            found[name] = f"missing: {exc}"
    return found


def changed_internals(expected: Mapping[str, str], installed: Mapping[str, str]) -> list[str]:
    """One line per name whose installed shape differs from the recorded one."""
    return [
        f"{name}: recorded {shape!r} for Dagster {PINNED_DAGSTER}, installed has "
        f"{installed.get(name, 'missing: not looked up')!r}"
        for name, shape in expected.items()
        if installed.get(name) != shape
    ]


def check_internals(
    expected: Mapping[str, str] = SHAPES, installed: Mapping[str, str] | None = None
) -> None:
    """Raise a RuntimeError naming every changed internal and where the upgrade notes are."""
    problems = changed_internals(
        expected, installed_shapes(expected) if installed is None else installed
    )
    if problems:
        raise RuntimeError(
            f"{len(problems)} Dagster internal(s) used by foundation/dagster_internals.py changed:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + f"\nRead {UPGRADE_NOTES} (Upgrading Dagster): check each use, then update SHAPES "
            "and PINNED_DAGSTER in foundation/dagster_internals.py."
        )
