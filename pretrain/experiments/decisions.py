"""Admission decisions and operator reviews as they are stored, and what the mixture leaves out.

    read_decisions("art/data_admission")            # {"forum-0007": "reject", ...}
    record_review("art/admission_reviews", "forum-0007", review, run_id=..., at=...)
    latest_review("art/admission_reviews", "forum-0007")   # {"decision", "reviewer", "reason", ...}
    excluded_groups(decisions, include_held=False)  # {"forum-0007"}

Reviews are append-only, one file per run, as the quarantine review's are: the latest one for a
group holds until a newer one replaces it. Both are read through
:func:`pretrain.experiments.records.read_record` and checked when read: a review must be an
:class:`AdmissionReview` (a known decision, who and why) with the time it was made (``at``), a
decision one of :data:`DECISIONS`. A file that is not raises a ``DataError`` naming it, or, given
``warn``, is skipped and reported: a review that is not valid is never applied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pretrain import storage
from pretrain.errors import DataError
from pretrain.experiments.admission import DECISIONS, AdmissionReview, CleaningCost
from pretrain.experiments.records import Warn, json_object, read_record, read_records

DECISION_FILE = "decision.json"


def review_record(data: Any) -> dict[str, Any]:
    """A stored review as :func:`record_review` writes it, checked (``ValueError``/``KeyError``
    when it is not one): its decision, reviewer and reason make an :class:`AdmissionReview`,
    and ``at`` and ``run_id`` say when and by which run it was made."""
    record = json_object(data)
    AdmissionReview(decision=record["decision"], reviewer=record["reviewer"],
                    reason=record["reason"])  # fmt: skip
    for key in ("at", "run_id"):
        if not isinstance(record[key], str) or not record[key]:
            raise TypeError(f"{key} must be a non-empty string, got {record[key]!r:.40}")
    return record


def decision_record(data: Any) -> dict[str, Any]:
    """A stored ``decision.json``, checked: its group, a decision of :data:`DECISIONS` and, when
    an operator's review made it, that review."""
    record = json_object(data)
    if not isinstance(record["group"], str):
        raise TypeError(f"group must be a string, got {record['group']!r:.40}")
    if record["decision"] not in DECISIONS:
        raise ValueError(f"decision {record['decision']!r:.40} is not one of {DECISIONS}")
    if record.get("review") is not None:
        review_record(record["review"])
    return record


def decision_records(admission_root: str, *, warn: Warn | None = None) -> dict[str, dict[str, Any]]:
    """Shard group → its ``decision.json``, checked. A file that is not a decision raises (the
    mixture must not take a group whose decision it cannot read) unless ``warn`` is given: then
    it is skipped and reported."""
    uris = storage.list_files(admission_root, (DECISION_FILE,))
    found = read_records(uris, decision_record, "an admission decision", warn=warn)
    return dict(sorted((r["group"], r) for _, r in found))


def read_decisions(admission_root: str, *, warn: Warn | None = None) -> dict[str, str]:
    """Shard group → its current decision (admit, hold, reject); see :func:`decision_records`."""
    records = decision_records(admission_root, warn=warn)
    return {group: str(record["decision"]) for group, record in records.items()}


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


def latest_review(
    reviews_root: str, group: str, *, warn: Warn | None = None
) -> dict[str, Any] | None:
    """The newest review of ``group`` (None when it has none). A file that is not a review
    raises unless ``warn`` is given: then it is reported and the next older one is taken."""
    files = sorted(storage.list_files(storage.join(reviews_root, group), (".json",)))
    for uri in reversed(files):
        try:
            return read_record(uri, review_record, "an admission review")
        except DataError as exc:
            if warn is None:
                raise
            warn(f"{exc} (skipped: it is not applied)")
    return None


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
