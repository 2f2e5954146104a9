"""Every private Dagster name the project uses, in this one module (the adapter).

Two things have no public Dagster API: submitting an asset backfill from Python (the
experiment searches, ``foundation/backfills.py``) and clearing the definitions-state storage an
entered instance leaves behind (``tests/conftest.py``). They get the private names only from
here. Pinned to Dagster ``PINNED_DAGSTER``; ``SHAPES`` records the shape of every name below as
that version has it, and ``tests/dagster/test_dagster_internals.py`` fails, naming the name
that moved, when the installed Dagster differs (docs/UPGRADING.md: how to upgrade). Running
steps on a Ray cluster is dagster-ray's ``ray_executor`` (``app/ray_definitions.py``), which
imports Dagster's step-delegating executor itself: pinned with Dagster, not listed here.

Private names (``dagster._…``), why each is needed, and the public API checked instead:

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

- ``dagster._core.events.DagsterEventBatchMetadata``, ``StepMaterializationData`` and
  ``dagster._core.instance.utils.RUNLESS_JOB_NAME``/``RUNLESS_RUN_ID``: materializations
  reported outside a run, as ``report_runless_asset_event`` makes them, but through the
  instance's batch writing (``DAGSTER_EVENT_BATCH_SIZE``: one ``INSERT`` of many on Postgres).
  Only the campaign-sized instance of the control-plane bench uses it
  (``tests/helpers/campaign.py``). Public instead: ``report_runless_asset_event``, one event a
  call (about 8 ms each on Postgres: 60,000 of them are most of the bench's build).
- ``create_engine`` as ``dagster._core.storage.{event_log,runs}.sqlite`` call it: the SQLite
  storages make an engine per connection, so SQLAlchemy compiles every statement anew; the
  same bench's build keeps one engine per database file while it writes
  (``one_sqlite_engine_per_file``). Public instead: none.

Public classes whose undocumented members we call (no ``@public`` in 1.13.27):
``DagsterInstance.add_backfill``, ``DagsterInstance.report_dagster_event``,
``DagsterInstance.optimize_for_webserver`` and ``PartitionsDefinition.subset_with_partition_keys``.
They are in ``SHAPES`` too.

Only ``foundation/backfills.py`` (where it submits a backfill, not at import),
``tests/conftest.py`` and ``tests/helpers/campaign.py`` use this module; importing it imports
Dagster (never ray or dagster-ray).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.events import DagsterEventBatchMetadata, StepMaterializationData
from dagster._core.execution.backfill import PartitionBackfill
from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID
from dagster._core.storage.defs_state.base import DefsStateStorage, _current_storage
from dagster._core.storage.event_log.sqlite import sqlite_event_log
from dagster._core.storage.runs.sqlite import sqlite_run_storage
from dagster._core.utils import make_new_backfill_id

__all__ = [
    "clear_defs_state_storage",
    "one_sqlite_engine_per_file",
    "report_materialization_batch",
    "submit_asset_backfill",
]

PINNED_DAGSTER = "1.13.27"
UPGRADE_NOTES = "docs/UPGRADING.md"

# name -> its shape in PINNED_DAGSTER (see shape_of): a function's parameters (``=`` marks a
# default), ``property``, ``field`` (a record's), ``class`` with its abstract methods
SHAPES: dict[str, str] = {
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
    "dagster._core.storage.defs_state.base._current_storage": "value ContextVar",
    "dagster._core.storage.defs_state.base.DefsStateStorage.get": "function ()",
    "dagster._core.events.DagsterEventBatchMetadata": "class (id, is_end)",
    "dagster._core.events.StepMaterializationData": "class (materialization, asset_lineage=)",
    "dagster._core.instance.utils.RUNLESS_JOB_NAME": "value str",
    "dagster._core.instance.utils.RUNLESS_RUN_ID": "value str",
    "dagster.DagsterInstance.report_dagster_event": (
        "function (self, dagster_event, run_id, log_level=, batch_metadata=, timestamp=)"
    ),
    "dagster.DagsterInstance.optimize_for_webserver": (
        "function (self, statement_timeout, pool_recycle, max_overflow)"
    ),
    "dagster._core.storage.event_log.sqlite.sqlite_event_log.create_engine": (
        "function (url, **kwargs)"
    ),
    "dagster._core.storage.runs.sqlite.sqlite_run_storage.create_engine": (
        "function (url, **kwargs)"
    ),
}


def clear_defs_state_storage() -> bool:
    """Clear the definitions-state storage an entered ``DagsterInstance`` left in this context;
    True when there was one (``tests/conftest.py`` clears what a test leaves behind)."""
    if DefsStateStorage.get() is None:
        return False
    _current_storage.set(None)
    return True


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


def report_materialization_batch(
    instance: dg.DagsterInstance, materializations: Sequence[dg.AssetMaterialization]
) -> None:
    """Report ``materializations`` (of one asset: Postgres records only the last in the asset's
    row) outside a run, as ``report_runless_asset_event`` does, as one batch when
    ``DAGSTER_EVENT_BATCH_SIZE`` is larger than their number (else one write each)."""
    batch_id = str(uuid.uuid4())
    for n, materialization in enumerate(materializations):
        instance.report_dagster_event(
            dg.DagsterEvent(
                event_type_value=dg.DagsterEventType.ASSET_MATERIALIZATION.value,
                event_specific_data=StepMaterializationData(materialization),
                job_name=RUNLESS_JOB_NAME,
            ),
            run_id=RUNLESS_RUN_ID,
            batch_metadata=DagsterEventBatchMetadata(batch_id, n == len(materializations) - 1),
        )


@contextlib.contextmanager
def one_sqlite_engine_per_file() -> Iterator[None]:
    """While open, Dagster's SQLite storages reuse one SQLAlchemy engine per database file (and
    so its compiled statements) instead of making one per connection; disposed on the way out."""
    engines: dict[str, Any] = {}
    modules = (sqlite_event_log, sqlite_run_storage)
    originals = [module.create_engine for module in modules]

    def keep(make: Any) -> Any:
        def create_engine(url: Any, **kwargs: Any) -> Any:
            key = f"{url} {sorted(kwargs.items())!r}"
            if key not in engines:
                engines[key] = make(url, **kwargs)
            return engines[key]

        return create_engine

    for module, make in zip(modules, originals, strict=True):
        module.create_engine = keep(make)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, make in zip(modules, originals, strict=True):
            module.create_engine = make  # type: ignore[attr-defined]
        for engine in engines.values():
            engine.dispose()


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
