"""Mirror of the trainer's run files to an ``s3://`` run root, so readers elsewhere see them.

With an ``s3://`` run root the trainer writes ``metrics.jsonl``, ``events.jsonl`` and the W&B
offline file (``wandb/offline-run-*/run-<id>.wandb``) into the node's staging folder
(:meth:`TrainConfig.local_root`). The recovery sensors and the checkpoint health labels run on
Dagster's host, which shares no filesystem with the node, and read the run root: the mirror
copies each file to the same relative path under it. Each copy is the whole file in one PUT, so
a reader sees the previous copy or the new one, never half of one::

    mirror = RunFilesMirror.for_config(cfg)   # None for a local run root (nothing to mirror)
    mirror.restore()       # a fresh node: continue the branch's JSONL files from the run root
    mirror.sync()          # upload the files that changed since the last upload
    mirror.sync_if_due()   # ... when metrics.mirror_interval_s has passed since the last one

On rank 0, :class:`MirrorCallback` syncs after a step when the interval has passed and right
after each checkpoint commit; ``main()`` syncs once more at exit, after W&B finished writing (a
crash that kills the process loses at most the last interval, as the node's disk would).
Files configured outside the staging folder (``metrics.metrics_file`` elsewhere) are not
mirrored: there is no run-root path for them. The files are small next to a checkpoint (a row
per step), so a whole-file upload per interval is cheap and needs no multipart bookkeeping.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pretrain import storage
from pretrain.run_files import offline_run_files
from pretrain.train.callbacks import Callback, StepRecord, Trainer
from pretrain.train.config import TrainConfig


class RunFilesMirror:
    """Uploads the changed run files of one branch from the staging folder to the run root."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.local_root = cfg.local_root().absolute()
        self.run_root = cfg.checkpoint.run_root
        self.interval_s = cfg.metrics.mirror_interval_s
        self._uploaded: dict[Path, tuple[int, int]] = {}  # file -> (size, mtime_ns) uploaded
        self._last_sync = time.monotonic()

    @classmethod
    def for_config(cls, cfg: TrainConfig) -> RunFilesMirror | None:
        return cls(cfg) if cfg.is_remote() else None

    def remote_uri(self, local: Path) -> str | None:
        """The run-root URI of a file in the staging folder (None: outside it)."""
        try:
            relative = local.absolute().relative_to(self.local_root)
        except ValueError:
            return None
        return storage.join(self.run_root, *relative.parts)

    def files(self) -> list[Path]:
        """The files to mirror: this branch's JSONL files and every W&B file of its run id."""
        wandb = offline_run_files(self.cfg.wandb_dir(), self.cfg.wandb_run_id())
        found = [self.cfg.metrics_path(), self.cfg.events_path(), *wandb]
        return [Path(p) for p in found if Path(p).is_file()]

    def restore(self) -> list[str]:
        """Copy the branch's JSONL files from the run root when the local copy is missing or
        shorter (a resume on another node), so appending continues the whole history rather
        than replacing it with this start's rows. Returns the URIs restored."""
        restored = []
        for local in (self.cfg.metrics_path(), self.cfg.events_path()):
            uri = self.remote_uri(local)
            if uri is None or not storage.exists(uri):
                continue
            data = storage.read_bytes(uri)
            if not local.exists() or local.stat().st_size < len(data):
                storage.write_bytes(data, str(local))  # temp name + rename
                restored.append(uri)
        return restored

    def sync(self) -> list[str]:
        """Upload each mirrored file whose size or mtime changed; returns the URIs written."""
        written = []
        for local in self.files():
            uri = self.remote_uri(local)
            stat = local.stat()
            if uri is None or self._uploaded.get(local) == (stat.st_size, stat.st_mtime_ns):
                continue
            # read once: the writer may append meanwhile; the next sync uploads the rest
            storage.write_bytes(local.read_bytes(), uri)
            self._uploaded[local] = (stat.st_size, stat.st_mtime_ns)
            written.append(uri)
        self._last_sync = time.monotonic()
        return written

    def sync_if_due(self) -> list[str]:
        if time.monotonic() - self._last_sync < self.interval_s:
            return []
        return self.sync()


class MirrorCallback(Callback):
    """Rank 0: mirror the run files every ``metrics.mirror_interval_s`` and after each commit."""

    def __init__(self, mirror: RunFilesMirror) -> None:
        self.mirror = mirror

    def on_train_start(self, trainer: Trainer) -> None:
        # after the trainer's own commit callback, which writes the checkpoint event
        trainer.checkpointer.on_commit.append(self._on_commit)
        self.mirror.sync()

    def _on_commit(self, path: Any, meta: dict[str, Any]) -> None:
        self.mirror.sync()

    def on_step_end(self, trainer: Trainer, record: StepRecord) -> None:
        self.mirror.sync_if_due()

    def on_train_end(self, trainer: Trainer, stopped_by: str | None) -> None:
        self.mirror.sync()
