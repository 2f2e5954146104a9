"""Operator reviews and the confirmed quarantine the mixture excludes.

    record_review(ReviewAction(...), "art/quarantine_reviews", run_id=run_id, known=ids)
    confirmed, status = resolve_confirmed(read_decision_documents("art/quarantined_documents"),
                                          read_reviews("art/quarantine_reviews"))
    write_confirmed(confirmed, status, "art/confirmed_quarantine")
    exclude = exclusion_reasons(confirmed, "art/dedup_clusters/clusters.parquet")  # id → why

Each review is one JSON file (``<UTC time>-<run id>.json``, written atomically, never edited), so
the review log is append-only and a retried run does not record twice. The confirmed set is
recomputed from every decision and every review in time order: ``confirm`` sets a decision's set
(all documents, or those with ``suspicion >= min_score``), ``extend`` adds documents, ``release``
empties it. A decision nobody reviewed stays *pending* and excludes nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.quarantine.config import ReviewAction

CONFIRMED = "confirmed.parquet"
CONFIRMED_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("source_id", pa.string()),
        ("tokens", pa.int64()),
        ("suspicion", pa.float64()),
        ("decision_id", pa.string()),
        ("reviewer", pa.string()),
        ("reason", pa.string()),
    ]
)


def record_review(
    action: ReviewAction, reviews_root: str, *, run_id: str, at: str, known: set[str]
) -> str:
    """Append ``action`` to the review log (once per run); ``known``: the quarantined decision
    ids (a review of an unknown decision is refused, not recorded)."""
    if action.decision_id not in known:
        raise ConfigError(
            f"no quarantine for decision {action.decision_id!r}; known decisions: "
            f"{sorted(known) or 'none yet (materialize quarantined_documents first)'}"
        )
    for uri in storage.list_files(reviews_root, (f"-{run_id}.json",)):
        return uri  # this run already recorded its review (a retry)
    uri = storage.join(reviews_root, f"{at}-{run_id}.json")
    storage.write_json({**dataclasses.asdict(action), "run_id": run_id, "at": at}, uri)
    return uri


def read_reviews(reviews_root: str) -> list[dict[str, Any]]:
    """Every recorded review, oldest first."""
    files = [u for u in storage.list_files(reviews_root, (".json",)) if "/." not in u]
    return [storage.read_json(u) for u in files]


def resolve_confirmed(
    decisions: pa.Table | None, reviews: list[dict[str, Any]]
) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
    """(confirmed documents, status per decision) after applying ``reviews`` in order."""
    rows = decisions.to_pylist() if decisions is not None else []
    by_decision: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_decision.setdefault(row["decision_id"], {})[row["doc_id"]] = row
    status: dict[str, dict[str, Any]] = {
        d: {"status": "pending", "documents": len(docs), "confirmed": 0, "reviews": 0}
        for d, docs in sorted(by_decision.items())
    }
    chosen: dict[str, dict[str, tuple[str, str]]] = {d: {} for d in by_decision}
    for review in reviews:
        decision = review["decision_id"]
        if decision not in by_decision:
            continue  # its quarantine folder is gone (wiped store): nothing to apply it to
        docs, why = by_decision[decision], (review["reviewer"], review["reason"])
        if review["action"] == "confirm":
            floor = review.get("min_score")
            chosen[decision] = {
                d: why
                for d, row in docs.items()
                if floor is None or (row["suspicion"] is not None and row["suspicion"] >= floor)
            }
            status[decision]["status"] = "confirmed"
        elif review["action"] == "extend":
            chosen[decision].update({d: why for d in review["doc_ids"]})
            status[decision]["status"] = "confirmed"
        else:
            chosen[decision] = {}
            status[decision]["status"] = "released"
        status[decision]["reviews"] += 1
        status[decision]["last_review"] = {
            k: review.get(k) for k in ("action", "reviewer", "reason", "at", "run_id")
        }
    out = []
    for decision, picked in sorted(chosen.items()):
        status[decision]["confirmed"] = len(picked)
        for doc_id, (reviewer, reason) in sorted(picked.items()):
            row = by_decision[decision].get(doc_id, {})
            out.append(
                {
                    "doc_id": doc_id,
                    "source": row.get("source"),
                    "source_id": row.get("source_id"),
                    "tokens": row.get("tokens", 0),
                    "suspicion": row.get("suspicion"),
                    "decision_id": decision,
                    "reviewer": reviewer,
                    "reason": reason,
                }
            )
    return pa.Table.from_pylist(out, schema=CONFIRMED_SCHEMA), status


def write_confirmed(confirmed: pa.Table, status: dict[str, Any], output_dir_uri: str) -> str:
    """``confirmed.parquet`` + ``status.json``, swapped in together; returns the confirmed set's
    fingerprint (sha256 of its ids and decisions): it changes only when what the mixture
    excludes changes, so it is the asset's data version."""
    buf = io.BytesIO()
    pq.write_table(confirmed, buf, compression="zstd")
    files = {CONFIRMED: buf.getvalue(), "status.json": json.dumps(status, indent=2).encode()}
    storage.replace_dir(files, output_dir_uri)
    decisions, docs = confirmed["decision_id"].to_pylist(), confirmed["doc_id"].to_pylist()
    pairs = sorted(zip(decisions, docs, strict=True))
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()


def read_confirmed(output_dir_uri: str) -> pa.Table | None:
    """The confirmed quarantine, or None when no review was ever resolved."""
    if not storage.is_committed(output_dir_uri):
        return None
    return storage.read_table(storage.join(output_dir_uri, CONFIRMED))


def exclusion_reasons(confirmed: pa.Table | None, clusters_uri: str | None) -> dict[str, str]:
    """Document id → why the mixture leaves it out: the confirmed documents and, with
    ``clusters_uri`` (``dedup_clusters/clusters.parquet``), every member of their duplicate
    clusters (a duplicate that becomes a survivor later would bring the text back)."""
    if confirmed is None or confirmed.num_rows == 0:
        return {}
    reasons = {
        row["doc_id"]: f"quarantine {row['decision_id']} (by {row['reviewer']}: {row['reason']})"
        for row in confirmed.to_pylist()
    }
    if clusters_uri is None or not storage.exists(clusters_uri):
        return reasons
    clusters = storage.read_table(clusters_uri, columns=["id", "cluster_id", "reason"])
    ids, cluster_ids = clusters["id"].to_pylist(), clusters["cluster_id"].to_pylist()
    hit = {c: i for i, c in zip(ids, cluster_ids, strict=True) if i in reasons}
    for doc_id, cluster, kind in zip(ids, cluster_ids, clusters["reason"].to_pylist(), strict=True):
        if cluster in hit and doc_id not in reasons:
            label = kind if kind != "survivor" else "cluster survivor"
            reasons[doc_id] = f"{label} of quarantined {hit[cluster]}"
    return reasons
