"""The quarantine at a glance, from the artifact store alone (what ``pretrain status`` prints).

summary = quarantine_status(".pretrain/artifacts")      # None: nothing quarantined yet
print("\\n".join(status_lines(summary)))
# quarantine: 1 decision(s), 16 documents, 8 confirmed
#   b00-s000000041-to-b01: 16 documents, 528 tokens, top suspicion +2.61, confirmed (8)
#   source web: 100.0% of quarantined tokens, 100.0% of the mixture (1.00x)
"""

from __future__ import annotations

from typing import Any

from pretrain import storage
from pretrain.quarantine.build import read_decision_documents
from pretrain.quarantine.report import mixture_token_shares, source_view


def quarantine_status(root: str) -> dict[str, Any] | None:
    """Per decision (documents, tokens, top suspicion, review status) and the source view, from
    ``quarantined_documents/``, ``confirmed_quarantine/status.json`` and the packed ledger."""
    docs = read_decision_documents(storage.join(root, "quarantined_documents"))
    if docs is None:
        return None
    confirmed_dir = storage.join(root, "confirmed_quarantine")
    reviewed = (
        storage.read_json(storage.join(confirmed_dir, "status.json"))
        if storage.is_committed(confirmed_dir)
        else {}
    )
    decisions = []
    for decision in sorted(set(docs["decision_id"].to_pylist())):
        rows = [r for r in docs.to_pylist() if r["decision_id"] == decision]
        scores = [r["suspicion"] for r in rows if r["suspicion"] is not None]
        review = reviewed.get(decision, {"status": "pending", "confirmed": 0})
        decisions.append(
            {
                "decision_id": decision,
                "documents": len(rows),
                "tokens": sum(r["tokens"] for r in rows),
                "top_suspicion": max(scores) if scores else None,
                "status": review["status"],
                "confirmed": review["confirmed"],
            }
        )
    shares = mixture_token_shares(storage.join(root, "packed_tokens"))
    return {
        "decisions": decisions,
        "documents": docs.num_rows,
        "confirmed": sum(d["confirmed"] for d in decisions),
        "sources": source_view(docs, shares),
    }


def status_lines(summary: dict[str, Any]) -> list[str]:
    lines = [
        f"quarantine: {len(summary['decisions'])} decision(s), {summary['documents']} documents, "
        f"{summary['confirmed']} confirmed"
    ]
    for d in summary["decisions"]:
        top = "–" if d["top_suspicion"] is None else f"{d['top_suspicion']:+.2f}"
        lines.append(
            f"  {d['decision_id']}: {d['documents']} documents, {d['tokens']:,} tokens, "
            f"top suspicion {top}, {d['status']} ({d['confirmed']})"
        )
    for s in summary["sources"]:
        mix = "?" if s["mixture_share"] is None else f"{s['mixture_share']:.1%}"
        over = "" if s["over_representation"] is None else f" ({s['over_representation']:.2f}x)"
        lines.append(
            f"  source {s['source']}: {s['quarantined_share']:.1%} of quarantined tokens, "
            f"{mix} of the mixture{over}"
        )
    return lines
