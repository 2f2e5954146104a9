"""The Dagster internals the project relies on are where ``foundation/dagster_internals.py`` says, with
the shape it recorded for the pinned Dagster; nothing else imports ``dagster._…``.

On a Dagster whose internals differ, ``test_every_recorded_internal_has_its_shape`` fails and
names each changed name with its recorded and installed shape; docs/UPGRADING.md says what to
do. The checker itself is proven on a made-up "changed" table (no Dagster mocked).

    pytest -q tests/dagster/test_dagster_internals.py
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import dagster
import pytest

from foundation import dagster_internals as internals

ROOT = Path(__file__).resolve().parents[2]
# the dagster family moves together: one version for all of these, its 0.x libraries with it
DAGSTER_FAMILY = ("dagster", "dagster-webserver", "dagster-graphql", "dagster-pipes")
DAGSTER_LIBRARIES = ("dagster-aws", "dagster-postgres")


def test_installed_dagster_is_the_pinned_one() -> None:
    assert dagster.__version__ == internals.PINNED_DAGSTER, (
        f"dagster {dagster.__version__} is installed; foundation/dagster_internals.py was checked "
        f"against {internals.PINNED_DAGSTER}: follow {internals.UPGRADE_NOTES}"
    )


def test_every_recorded_internal_has_its_shape() -> None:
    internals.check_internals()  # raises, naming each changed internal


def test_a_changed_internal_is_named_with_both_shapes() -> None:
    """The checker on a table where one signature changed and one name is gone."""
    recorded = {
        "dagster._core.utils.make_new_backfill_id": "function ()",
        "dagster.DagsterInstance.add_backfill": "function (self, partition_backfill)",
        "dagster._core.execution.backfill.PartitionBackfill": "class (backfill_id, status=)",
    }
    installed = {
        "dagster._core.utils.make_new_backfill_id": "function (prefix)",
        "dagster.DagsterInstance.add_backfill": "function (self, partition_backfill)",
        "dagster._core.execution.backfill.PartitionBackfill": (
            "missing: dagster._core.execution.backfill has no PartitionBackfill"
        ),
    }
    problems = internals.changed_internals(recorded, installed)
    assert problems == [
        "dagster._core.utils.make_new_backfill_id: recorded 'function ()' for Dagster "
        f"{internals.PINNED_DAGSTER}, installed has 'function (prefix)'",
        "dagster._core.execution.backfill.PartitionBackfill: recorded 'class (backfill_id, "
        f"status=)' for Dagster {internals.PINNED_DAGSTER}, installed has 'missing: "
        "dagster._core.execution.backfill has no PartitionBackfill'",
    ]
    with pytest.raises(RuntimeError) as raised:
        internals.check_internals(recorded, installed)
    message = str(raised.value)
    assert message.startswith(
        "2 Dagster internal(s) used by foundation/dagster_internals.py changed"
    )
    assert "docs/UPGRADING.md" in message and "add_backfill" not in message


def test_shapes_are_read_from_the_objects_themselves() -> None:
    """shape_of and resolve on real objects whose shape the test knows."""

    class Handler:
        def launch(self, context, *, retries=0, **extra): ...

        @property
        def name(self) -> str:
            return "h"

    assert internals.shape_of(Handler, "launch") == "function (self, context, *, retries=, **extra)"
    assert internals.shape_of(Handler, "name") == "property"
    assert internals.shape_of(internals, "clear_defs_state_storage") == "function ()"
    with pytest.raises(LookupError, match="dagster._core.events has no NoSuchEvent"):
        internals.resolve("dagster._core.events.NoSuchEvent")
    gone = internals.installed_shapes(["dagster._core.utils.make_new_backfill_id_v2"])
    assert gone == {
        "dagster._core.utils.make_new_backfill_id_v2": (
            "missing: dagster._core.utils has no make_new_backfill_id_v2"
        )
    }


def test_the_docstring_names_every_private_internal() -> None:
    doc = internals.__doc__ or ""
    missing = []
    for name in internals.SHAPES:
        if not name.startswith("dagster._"):
            continue
        owner, attribute = internals.resolve(name)
        what = attribute if inspect.ismodule(owner) else owner.__name__
        if what not in doc:
            missing.append(name)
    assert missing == [], (
        f"list these in the docstring of foundation/dagster_internals.py: {missing}"
    )


def private_dagster_uses(path: Path) -> list[str]:
    """``dagster._…`` (or ``dagster_shared``) imports and attribute uses in one file."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            names = [f"{node.value.id}.{node.attr}"] if node.value.id in ("dagster", "dg") else []
        else:
            continue
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno} {name}"
            for name in names
            if re.match(r"(dagster|dg)\._(?!_)", name) or name.startswith("dagster_shared")
        ]
    return found


def test_no_private_dagster_name_outside_the_adapter() -> None:
    adapter = ROOT / "foundation" / "dagster_internals.py"
    files = [
        p
        for folder in (
            "pretrain",
            "foundation",
            "pretrain_assets",
            "jobs",
            "app",
            "sensors",
            "resources",
            "tests",
            "bench",
        )
        for p in (ROOT / folder).rglob("*.py")
        if p != adapter
    ]
    offenders = [use for p in files for use in private_dagster_uses(p)]
    assert offenders == [], "move these into foundation/dagster_internals.py:\n" + "\n".join(
        offenders
    )
    assert private_dagster_uses(adapter)  # the scanner does see the adapter's own imports


def _pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    pins = {}
    for spec in specs:
        match = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^;\s]+)", spec)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_the_dagster_family_is_pinned_together() -> None:
    """One Dagster version for the family; dagster-aws and dagster-postgres at the release that
    requires exactly that version (pip would otherwise fall back to an old dagster-aws)."""
    pins = _pins()
    assert {name: pins.get(name) for name in DAGSTER_FAMILY} == dict.fromkeys(
        DAGSTER_FAMILY, internals.PINNED_DAGSTER
    )
    for library in DAGSTER_LIBRARIES:
        assert pins.get(library) == importlib.metadata.version(library), (
            f"{library} installed {importlib.metadata.version(library)}, pinned {pins.get(library)}"
        )
        required = [
            r for r in importlib.metadata.requires(library) or [] if r.startswith("dagster==")
        ]
        assert required == [f"dagster=={internals.PINNED_DAGSTER}"], (
            f"{library}=={pins.get(library)} requires {required}: pin the {library} release made "
            f"for dagster {internals.PINNED_DAGSTER} ({internals.UPGRADE_NOTES})"
        )
    assert "dagster-ray" in pins, "dagster-ray is pinned with the family (the ray extra)"


def test_an_asset_backfill_is_submitted_through_the_adapter() -> None:
    """foundation/backfills.py (the experiment searches' backfill) on a real instance."""
    from foundation.backfills import launch_asset_backfill

    partitions = dagster.StaticPartitionsDefinition(["a", "b", "c"])
    with dagster.instance_for_test() as instance:
        backfill_id = launch_asset_backfill(
            instance, dagster.AssetKey("x"), partitions, ["a", "c"], tags={"t": "1"}, title="t"
        )
        [backfill] = instance.get_backfills()
        subset = backfill.asset_backfill_data.target_subset.get_partitions_subset(
            dagster.AssetKey("x")
        )
    assert backfill.backfill_id == backfill_id and backfill.tags == {"t": "1"}
    assert set(subset.get_partition_keys()) == {"a", "c"} and backfill.title == "t"


def test_a_late_exit_leaves_a_dead_instances_storage_which_clearing_removes() -> None:
    """How CI twice failed tests/unit/foundations/test_settings.py ("Attempted to resolve undefined
    DagsterInstance weakref"): an instance entered inside a generator that outlives its test in
    a reference cycle exits only when garbage is collected, and its exit restores the storage
    of the instance that was entered around it, long gone by then. ``tests/conftest.py``
    collects after each test that entered an instance and clears what is left."""
    import gc

    def entered() -> Iterator[None]:
        with dagster.DagsterInstance.ephemeral():
            yield

    @dagster.asset
    def a() -> None: ...

    gc.disable()
    try:
        with dagster.instance_for_test() as outer:
            inner = entered()
            next(inner)
            loop: list = [inner]
            loop.append(loop)
            del inner, loop
        del outer
        assert not internals.clear_defs_state_storage()  # nothing left when the test ends
        gc.collect()  # ... until the generator is finalized
        with pytest.raises(
            dagster.DagsterInvariantViolationError, match="undefined DagsterInstance"
        ):
            dagster.Definitions(assets=[a]).get_repository_def()
        assert internals.clear_defs_state_storage()
        assert dagster.Definitions(assets=[a]).get_repository_def().assets_defs_by_key
    finally:
        gc.enable()
