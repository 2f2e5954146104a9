"""The checkpoints a branch can roll back to, and persisting the monitor's health labels.

A resumed branch starts from a checkpoint of another branch (``b01`` from
``b00/step-00000040``), so its rollback candidates are its own checkpoints plus its ancestors'
up to each fork point::

    ckpts = lineage_checkpoints("runs", "b01", resume_path="runs/b00/step-00000040")
    apply_health_labels(ckpts, {"b00-s000000040": "healthy"}, reason="no alarm in 20 steps")

Healthy labels are written with :func:`pretrain.checkpoint.dcp.mark_healthy`, so pruning never
deletes a rollback target. Torch-free: sensors call this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from pretrain.errors import CheckpointError

MAX_LINEAGE_DEPTH = 64
# a checkpoint's health label: the recovery loop's verdict (pretrain.recovery.policy)
HEALTHY, SUSPECT, PENDING = "healthy", "suspect", "pending"


@dataclass(frozen=True, kw_only=True)
class CheckpointInfo:
    """A committed checkpoint as the recovery loop sees it: key, path (local or ``s3://``),
    step and health label (HEALTHY, SUSPECT or PENDING)."""

    key: str
    path: str
    step: int
    label: str


def lineage_checkpoints(
    run_root: str | Path, branch: str, resume_path: str | Path | None = None
) -> list[CheckpointInfo]:
    """Committed checkpoints of ``branch`` and its ancestors, oldest first, with on-disk labels
    (HEALTHY if marked healthy, else PENDING: not judged yet).

    The fork point of a branch is the ``lineage.parent`` recorded in its oldest checkpoint, or
    ``resume_path`` (what the running job resumed from) while it has none yet. Paths stay URI
    strings (local or ``s3://``) throughout: ``CheckpointInfo.path`` is one."""
    root = str(run_root)
    found: list[CheckpointInfo] = []
    seen: set[str] = set()
    limit: int | None = None
    fork = str(resume_path) if resume_path else None  # only the running branch may lack one
    for _ in range(MAX_LINEAGE_DEPTH):
        paths = [
            str(p)
            for p in ckpt.list_checkpoints(root, branch)
            if limit is None or ckpt.step_of(p) <= limit
        ]
        found[:0] = [_info(branch, p) for p in paths]
        seen.add(branch)
        parent = _parent(paths[0]) if paths else fork
        fork = None
        if parent is None:
            return found
        parent_branch_dir = storage.parent(parent)  # <root>/<branch>/step-<N> -> <root>/<branch>
        if storage.basename(parent_branch_dir) == branch:
            return found
        branch, limit = storage.basename(parent_branch_dir), ckpt.step_of(parent)
        if branch in seen:
            raise CheckpointError(f"checkpoint lineage loops back to branch {branch!r} at {parent}")
        if not storage.same_location(storage.parent(parent_branch_dir), root):
            return found  # forked from another run root: not ours to roll back to
    raise CheckpointError(f"checkpoint lineage of {branch!r} is deeper than {MAX_LINEAGE_DEPTH}")


def _parent(path: str) -> str | None:
    parent = ckpt.read_meta(path).get("lineage", {}).get("parent")
    return str(parent) if parent else None


def _info(branch: str, path: str) -> CheckpointInfo:
    step = ckpt.step_of(path)
    return CheckpointInfo(
        key=ckpt.checkpoint_key(branch, step),
        path=path,
        step=step,
        label=HEALTHY if ckpt.is_healthy(path) else PENDING,
    )


def apply_health_labels(
    checkpoints: Sequence[CheckpointInfo], labels: Mapping[str, str], reason: str
) -> list[str]:
    """Mark the checkpoints labelled HEALTHY on disk (idempotent); returns the keys newly marked.

    The trainer prunes old checkpoints while the sensor runs: one pruned between listing and
    marking is passed over (it can no longer be a rollback target), and a label written into a
    directory that vanished meanwhile is removed again. Any other failure raises."""
    marked = []
    for info in checkpoints:
        if labels.get(info.key) == HEALTHY and info.label != HEALTHY:
            try:
                ckpt.mark_healthy(info.path, reason=reason)
            except CheckpointError:
                if storage.is_committed(info.path):
                    raise
                continue  # pruned since it was listed
            if not storage.is_committed(info.path):  # pruned while we wrote the label
                storage.remove(storage.join(info.path, ckpt.HEALTHY))
                if not storage.is_s3(info.path):  # S3 has no folders to leave behind
                    with contextlib.suppress(OSError):  # only if nothing else is in it
                        Path(info.path).rmdir()
                continue
            marked.append(info.key)
    return marked
