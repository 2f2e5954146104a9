"""Committed checkpoint folders as the readers see them (no weights), the SQLite instance the
sensor tests tick on and ``eval_sensor``'s ticks; tests import these, never each other."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pretrain import storage
from pretrain.checkpoint.dcp import checkpoint_dir_for_key

if TYPE_CHECKING:
    from dagster import DagsterInstance, SensorResult


def committed_step(root: Path, branch: str, step: int, parent: str | None = None) -> str:
    """A committed ``root/<branch>/step-<step>`` whose meta.json names its step and its
    lineage ``parent`` (the checkpoint a fork started from)."""
    path = root / branch / f"step-{step:08d}"
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"step": step, "lineage": {"parent": parent}}))
    storage.commit_marker(str(path))
    return str(path)


def committed_key(root: Path, key: str) -> Path:
    """The committed (empty) folder of checkpoint ``key`` under ``root/runs``."""
    path = Path(checkpoint_dir_for_key(str(root / "runs"), key))
    path.mkdir(parents=True, exist_ok=True)
    storage.commit_marker(str(path))
    return path


def flip_4k(path: Path) -> None:
    """Damage ``path`` in place: 4 KiB from its middle on, every bit flipped (same size)."""
    with path.open("r+b") as f:
        f.seek(path.stat().st_size // 2)
        block = f.read(4096)
        f.seek(path.stat().st_size // 2)
        f.write(bytes(b ^ 0xFF for b in block))


@contextmanager
def sqlite_instance(tmp_path: Path) -> Iterator[DagsterInstance]:
    """A real SQLite Dagster instance under ``tmp_path/home``."""
    from dagster import DagsterInstance

    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(tempdir=str(tmp_path / "home")) as instance:
        yield instance


def eval_ticks(
    instance: DagsterInstance, root: Path
) -> tuple[Any, Callable[[str | None], SensorResult]]:
    """(the repository of the Definitions on artifact root ``root``, one ``eval_sensor`` tick on
    ``instance`` from a cursor, checked to be a ``SensorResult``)."""
    from dagster import SensorResult, build_sensor_context

    from app.definitions import build_definitions
    from resources.metrics import RecoveryThresholds
    from resources.storage import ArtifactStore
    from sensors.eval_sensor import eval_sensor

    repository = build_definitions(artifact_root=str(root)).get_repository_def()
    resources = {"store": ArtifactStore(root=str(root)), "recovery": RecoveryThresholds()}

    def tick(cursor: str | None) -> SensorResult:
        with build_sensor_context(
            instance=instance, repository_def=repository, cursor=cursor, resources=resources
        ) as context:
            result = eval_sensor(context)
        assert isinstance(result, SensorResult)
        return result

    return repository, tick
