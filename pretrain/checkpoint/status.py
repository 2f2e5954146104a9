"""A branch's checkpoints as ``pretrain status`` shows them, each verified against its record.

Every committed checkpoint is checked against its commit record (sizes, then checksums:
:func:`pretrain.checkpoint.dcp.checkpoint_problems`), so a damaged one is marked ``DAMAGED`` and
is never reported as the latest: "latest" is the newest intact checkpoint, the one
``resume=latest`` would start from. The checkpoints resume already passed over (the
``checkpoint_damaged`` events) are listed too. Torch-free; local or ``s3://`` run roots::

    for line in status_lines([branch_status("art/runs", b) for b in list_branches("art/runs")]):
        print(line)
    # b00: 3 checkpoints (1 DAMAGED), latest b00-s000000008 (tokens seen 2,112), healthy: step-00000004
    # b00: DAMAGED checkpoint step-00000012: __0_0.distcp: 1302 bytes, the commit record says ...

``checksums=False`` checks sizes only (nothing is read: for campaigns whose checkpoints are too
large to hash on every look; the lines say so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pretrain.checkpoint.dcp import (
    checkpoint_problems,
    damage_reports,
    is_healthy,
    list_checkpoints,
    read_meta,
)


@dataclass(frozen=True, kw_only=True)
class CheckpointState:
    name: str  # step-<N:08d>
    path: Any  # a Path, or an s3:// URI
    healthy: bool
    problems: tuple[str, ...]  # () when intact


@dataclass(frozen=True, kw_only=True)
class BranchStatus:
    branch: str
    checkpoints: tuple[CheckpointState, ...]  # committed ones, oldest first
    latest: CheckpointState | None  # the newest intact one
    latest_meta: dict[str, Any] | None
    passed_over: tuple[dict[str, Any], ...]  # checkpoint_damaged events of earlier resumes
    checksums: bool

    @property
    def damaged(self) -> list[CheckpointState]:
        return [c for c in self.checkpoints if c.problems]


def branch_status(run_root: Any, branch: str, *, checksums: bool = True) -> BranchStatus:
    """Every committed checkpoint of ``branch`` verified, and the newest intact one's meta."""
    states = tuple(
        CheckpointState(
            name=str(path).rstrip("/").rsplit("/", 1)[-1],
            path=path,
            healthy=is_healthy(path),
            problems=tuple(checkpoint_problems(path, checksums=checksums)),
        )
        for path in list_checkpoints(run_root, branch)
    )
    intact = [s for s in states if not s.problems]
    latest = intact[-1] if intact else None
    return BranchStatus(
        branch=branch,
        checkpoints=states,
        latest=latest,
        latest_meta=read_meta(latest.path) if latest is not None else None,
        passed_over=tuple(damage_reports(run_root, branch)),
        checksums=checksums,
    )


def status_lines(statuses: list[BranchStatus]) -> list[str]:
    lines = []
    for s in statuses:
        if s.checkpoints:
            lines.append(_summary(s))
        for c in s.damaged:
            lines.append(
                f"{s.branch}: DAMAGED checkpoint {c.name}: {'; '.join(c.problems)} (resume passes "
                "over it and sets it aside; inspect or delete it)"
            )
        for d in s.passed_over:
            lines.append(
                f"{s.branch}: DAMAGED checkpoint step {d['step']} passed over "
                f"({'; '.join(d['problems'])}); resumed from {d['resumed_from']}, "
                f"damaged files kept in {d['moved_to']}"
            )
    return lines


def _summary(s: BranchStatus) -> str:
    count = f"{len(s.checkpoints)} checkpoints"
    if s.damaged:
        count += f" ({len(s.damaged)} DAMAGED)"
    verified = "" if s.checksums else " [sizes checked, not checksums]"
    if s.latest is None or s.latest_meta is None:
        return (
            f"{s.branch}: {count}, none intact: resume=latest has nothing to start from "
            f"(resume another branch's checkpoint with run.resume=<dir>){verified}"
        )
    healthy = [c.name for c in s.checkpoints if c.healthy and not c.problems]
    return (
        f"{s.branch}: {count}, latest {s.latest_meta.get('key') or s.latest.name} "
        f"(tokens seen {s.latest_meta.get('tokens_seen', 0):,}), "
        f"healthy: {', '.join(healthy) if healthy else 'none labelled'}{verified}"
    )
