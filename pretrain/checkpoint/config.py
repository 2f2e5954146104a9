"""Checkpoint settings: where checkpoints go, how many are kept, how they are written.

Torch-free (the Dagster layer builds it), and the one definition the whole checkpoint package
takes; ``TrainConfig.checkpoint`` holds one::

    cfg = CheckpointConfig(run_root="s3://bucket/campaign/runs", every_steps=500, keep_last=3)
    cfg.branch_dir("b00")                 # local folder: the run root, or its staging folder
    cfg.checkpoint_uri("b00", "step-00000500")   # where the committed checkpoint lives
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pretrain.errors import ConfigError
from pretrain.settings import check_types


@dataclass(frozen=True, kw_only=True)
class CheckpointConfig:
    """Checkpoints go to ``<run_root>/<branch>/step-<N:08d>``: a local path or ``s3://``.

    With an ``s3://`` run root, DCP writes into ``staging_dir`` (local), the files are uploaded
    and the commit record goes last (:mod:`pretrain.checkpoint.remote`); a resume downloads and
    verifies the checkpoint there first. ``staging_dir`` also holds what the trainer writes
    locally for such a run (``metrics.jsonl``, ``events.jsonl``, W&B files); default:
    ``<system temp>/pretrain-staging/<hash of run_root>``. Ignored for a local run root.

    Pruning keeps the newest ``keep_last`` checkpoints plus every checkpoint labelled healthy
    and every step in ``protected_steps``. The trainer labels a checkpoint healthy when its step
    is a multiple of ``healthy_every_steps`` (0: never) and its loss window is finite; the
    recovery loop labels others with :func:`pretrain.checkpoint.dcp.mark_healthy`.
    ``async_save`` writes with ``torch.distributed.checkpoint.async_save`` in a background thread
    (staged to CPU first); the commit happens before the next save or at the end of the run.
    """

    run_root: str
    every_steps: int = 100
    keep_last: int = 3
    protected_steps: tuple[int, ...] = ()
    healthy_every_steps: int = 0
    async_save: bool = False
    staging_dir: str | None = None

    def __post_init__(self) -> None:
        check_types(self)
        if not self.run_root or "://" in self.run_root and not self.run_root.startswith("s3://"):
            raise ConfigError(
                f"checkpoint.run_root={self.run_root!r} must be a local directory or an "
                "s3://bucket/prefix URI"
            )
        if self.staging_dir is not None and "://" in self.staging_dir:
            raise ConfigError(
                f"checkpoint.staging_dir={self.staging_dir!r} must be a local directory (DCP "
                "writes there before the upload)"
            )
        if self.every_steps <= 0 or self.keep_last <= 0:
            raise ConfigError("checkpoint.every_steps and checkpoint.keep_last must be >= 1")
        if self.healthy_every_steps < 0 or self.healthy_every_steps % self.every_steps:
            raise ConfigError(
                f"checkpoint.healthy_every_steps={self.healthy_every_steps} must be 0 (off) or a "
                f"multiple of every_steps={self.every_steps}, or no checkpoint would match"
            )

    def is_remote(self) -> bool:
        """Checkpoints on object storage (``s3://``), staged locally."""
        return self.run_root.startswith("s3://")

    def local_root(self) -> Path:
        """Where a trainer writes locally: the run root, or the staging folder of an S3 one."""
        if not self.is_remote():
            return Path(self.run_root)
        if self.staging_dir:
            return Path(self.staging_dir)
        digest = hashlib.sha256(self.run_root.encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / "pretrain-staging" / digest

    def branch_dir(self, branch: str) -> Path:
        """A branch's local folder (checkpoint staging, metrics, events)."""
        return self.local_root() / branch

    def checkpoint_uri(self, branch: str, step_dir: str) -> str:
        """Where a committed checkpoint of ``branch`` lives (local path or ``s3://`` URI)."""
        if self.is_remote():
            return f"{self.run_root.rstrip('/')}/{branch}/{step_dir}"
        return str(self.branch_dir(branch) / step_dir)
