"""The local cache of evaluation task files: where it is, its manifest, and its verification.

``pretrain evals fetch`` (:mod:`pretrain.eval.fetch`) fills the folder and records every file's
sha256 in ``SOURCES.json``; the zero-shot tasks (:mod:`pretrain.eval.tasks`) and
decontamination (:mod:`pretrain.decontam`) read it and check each file against that record
first, so a file changed in the cache is caught before it is scored or protected::

    default_eval_dir()          # $PRETRAIN_EVAL_DIR, else $XDG_CACHE_HOME or ~/.cache /pretrain/eval
    verify_eval_dir()           # {"hellaswag": ".../hellaswag_val.jsonl.gz", ...} or DataError
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pretrain.errors import DataError

MANIFEST = "SOURCES.json"


def default_eval_dir() -> Path:
    """Where task files live: ``$PRETRAIN_EVAL_DIR``, else the user's cache folder."""
    if explicit := os.environ.get("PRETRAIN_EVAL_DIR"):
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pretrain" / "eval"


def sha256_file(path: Path) -> str | None:
    """The file's sha256 (hex), or None when it does not exist."""
    if not path.is_file():
        return None
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(2**20):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(root: Path) -> dict[str, Any]:
    """``SOURCES.json`` of an eval folder (``{}`` when the folder was never fetched into)."""
    path = root / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {}


def verify_eval_dir(eval_dir: str | Path | None = None) -> dict[str, str]:
    """Task name → file for every task whose file matches ``SOURCES.json``; a file whose
    hash differs raises DataError (tasks never fetched are simply absent from the result)."""
    root = Path(eval_dir) if eval_dir is not None else default_eval_dir()
    ok = {}
    for name, entry in read_manifest(root).items():
        path = root / entry["output"]
        if not path.is_file():
            continue
        if sha256_file(path) != entry["sha256"]:
            raise DataError(
                f"{path} does not match the sha256 recorded when it was fetched: it was "
                "changed after download; run `pretrain evals fetch --force`"
            )
        ok[name] = str(path)
    return ok
