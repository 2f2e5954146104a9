"""Admission decisions and operator reviews as they are stored, and what the mixture leaves out.

    read_decisions("art/data_admission")            # {"forum-0007": "reject", ...}
    record_review("art/admission_reviews", "forum-0007", review, run_id=..., at=...)
    latest_review("art/admission_reviews", "forum-0007")   # {"decision", "reviewer", "reason", ...}
    excluded_groups(decisions, include_held=False)  # {"forum-0007"}

Reviews are append-only, one file per run, as the quarantine review's are: the latest one for a
group holds until a newer one replaces it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pretrain import storage
from pretrain.experiments.admission import AdmissionReview, CleaningCost

DECISION_FILE = "decision.json"


def read_decisions(admission_root: str) -> dict[str, str]:
    """Shard group → its current decision (admit, hold, reject)."""
    found = {}
    for uri in storage.list_files(admission_root, (DECISION_FILE,)):
        record = storage.read_json(uri)
        found[str(record["group"])] = str(record["decision"])
    return dict(sorted(found.items()))


def excluded_groups(decisions: Mapping[str, str], *, include_held: bool) -> list[str]:
    """The groups the mixture leaves out: rejected ones, and held ones unless ``include_held``."""
    out = {"reject"} | (set() if include_held else {"hold"})
    return sorted(g for g, d in decisions.items() if d in out)


def record_review(
    reviews_root: str, group: str, review: AdmissionReview, *, run_id: str, at: str
) -> str:
    """Append ``review`` for ``group`` (once per run: a retried run does not add another)."""
    folder = storage.join(reviews_root, group)
    for uri in storage.list_files(folder, (f"-{run_id}.json",)):
        return uri
    uri = storage.join(folder, f"{at}-{run_id}.json")
    storage.write_json(
        {**dataclasses.asdict(review), "group": group, "run_id": run_id, "at": at}, uri
    )
    return uri


def latest_review(reviews_root: str, group: str) -> dict[str, Any] | None:
    files = sorted(storage.list_files(storage.join(reviews_root, group), (".json",)))
    return storage.read_json(files[-1]) if files else None


def _size(uri: str) -> int:
    fs, path = storage.filesystem(uri)
    info = fs.get_file_info(path)
    return int(info.size or 0)


def cleaning_cost(read_manifest: Mapping[str, Any], cpu_seconds: float) -> CleaningCost:
    """The stages' CPU time on a group and the raw bytes behind it, from the raw shard's
    ``manifest.json`` (files read, and files left unread by ``max_docs``)."""
    read = [f["uri"] for f in read_manifest.get("files", [])]
    unread = [
        f["uri"] if isinstance(f, Mapping) else str(f)
        for f in read_manifest.get("files_not_read", [])
    ]
    processed = sum(_size(u) for u in read)
    return CleaningCost(
        cpu_seconds=cpu_seconds,
        raw_bytes_processed=processed,
        raw_bytes_total=processed + sum(_size(u) for u in unread),
    )
