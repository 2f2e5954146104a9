"""The local cache of evaluation task files: where it is, its manifest, and its verification.

``pretrain evals fetch`` (:mod:`pretrain.eval.fetch`) fills the folder and records every file's
sha256 in ``SOURCES.json``; the zero-shot tasks (:mod:`pretrain.eval.tasks`) and
decontamination (:mod:`pretrain.decontam`) read it and check each file against that record
first, so a file changed in the cache is caught before it is scored or protected::

    default_eval_dir()          # $PRETRAIN_EVAL_DIR, else $XDG_CACHE_HOME or ~/.cache /pretrain/eval
    verify_eval_dir()           # {"hellaswag": ".../hellaswag_val.jsonl.gz", ...} or DataError
    verify_eval_file(path)      # one file against the SOURCES.json of its folder, or DataError

A file the manifest does not list (a user's own task file) is not checked: nothing recorded it.
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


def verify_eval_file(path: str | Path) -> bool:
    """Check one task file against the ``SOURCES.json`` of its folder: True when its sha256
    matches the record, False when no record names it (a user's own file), DataError when it
    was changed after download."""
    path = Path(path)
    for entry in read_manifest(path.parent).values():
        if entry.get("output") == path.name:
            if sha256_file(path) != entry["sha256"]:
                raise DataError(_changed(path))
            return True
    return False


def _changed(path: Path) -> str:
    return (
        f"{path} does not match the sha256 recorded when it was fetched: it was "
        "changed after download; run `pretrain evals fetch --force`"
    )


def unreadable_message(path: str | Path, lines_read: int, exc: BaseException) -> str:
    """What to say of a task file that cannot be read to its end (cut short, not gzip)."""
    what = {
        "EOFError": "is cut short (a truncated download?)",
        "BadGzipFile": "is not a gzip file",
        "UnicodeDecodeError": "is not UTF-8 text",
    }.get(type(exc).__name__, f"cannot be read ({type(exc).__name__}: {exc})")
    return (
        f"eval task file {path} {what}, after {lines_read} lines: replace it "
        "(`pretrain evals fetch --force` for the cached tasks) or remove it"
    )


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
            raise DataError(_changed(path))
        ok[name] = str(path)
    return ok
