"""Where a training run's W&B files are, named the same way by the trainer and by its readers.

The trainer writes W&B offline files under ``<wandb_dir>/wandb/offline-run-<time>-<id>/``
with a run id derived from the run root and the branch, so the recovery sensors find a
branch's files without the trainer's config (:mod:`pretrain.train.metrics` writes them,
:mod:`pretrain.train.mirror` copies them to an ``s3://`` run root, :mod:`pretrain.recovery`
reads them)::

    run_id = wandb_run_id("runs", "b00")                 # 'b00-1a2b3c4d'
    files = offline_run_files("runs", run_id)           # oldest first (crash-resumes add files)
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pretrain import storage


def wandb_run_id(run_root: str | Path, branch: str) -> str:
    """The trainer's default W&B run id for ``branch`` under ``run_root`` (a local run root by
    its absolute path, an ``s3://`` one as written); ``TrainConfig.wandb_run_id`` calls this."""
    root = str(run_root) if storage.is_s3(str(run_root)) else str(Path(run_root).absolute())
    return f"{branch}-{hashlib.sha256(root.encode()).hexdigest()[:8]}"


def offline_run_files(wandb_dir: str | Path, run_id: str) -> list[Any]:
    """Every offline file of W&B run ``run_id`` under ``<wandb_dir>/wandb``, oldest first:
    ``Path`` s, or URI strings when ``wandb_dir`` is ``s3://`` (the trainer's mirror).

    A crash-resumed branch keeps its run id, and each ``wandb.init`` makes a new
    ``offline-run-<YYYYMMDD_HHMMSS>-<id>`` folder, so one run can have several files; the
    timestamp in the folder name orders them (:func:`run_folder`).
    """
    name = f"run-{run_id}.wandb"
    if storage.is_s3(str(wandb_dir)):
        prefix = storage.join(str(wandb_dir), "wandb")
        uris = [u for u in storage.list_files(prefix, (name,)) if _is_run_folder(u, run_id)]
        return sorted(uris, key=run_folder)
    root = Path(wandb_dir) / "wandb"
    found = [
        folder / name
        for folder in root.glob("offline-run-*")
        if _is_run_folder(str(folder / name), run_id) and (folder / name).is_file()
    ]
    return sorted(found, key=run_folder)


def run_folder(path: str | Path) -> str:
    """The ``offline-run-<time>-<id>`` folder name of an offline file (a reader's cursor key)."""
    return str(path).rstrip("/").split("/")[-2]


def _is_run_folder(path: str, run_id: str) -> bool:
    parts = path.rstrip("/").split("/")
    folder, suffix = parts[-2], f"-{run_id}"
    return (
        len(parts) >= 3
        and parts[-3] == "wandb"
        and parts[-1] == f"run-{run_id}.wandb"
        and folder.startswith("offline-run-")
        and folder.endswith(suffix)
        and folder[len("offline-run-") : -len(suffix)].replace("_", "").isdigit()
    )
