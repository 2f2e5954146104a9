"""``quarantine_decision``: one rollback's skip window → its scored documents, written once.

    stats = quarantine_decision(
        SkipRecord(decision_id="b00-s000000041-to-b01", branch="b00", window=(41, 43),
                   spike_step=41, packed_dir="art/packed_tokens", plan=BatchPlan(...),
                   healthy_checkpoint="art/runs/b00/step-00000030", after_checkpoint=None,
                   documents_uri="art/data_mixture/train.parquet"),
        "art/quarantined_documents/b00-s000000041-to-b01",
        QuarantineConfig(),
    )

Writes ``documents.parquet`` (one row per document of the window: decision id, branch, steps,
tokens, source, ``source_id``, loss, suspicion, rank) and ``decision.json`` into one folder with a
commit marker (:func:`pretrain.storage.replace_dir`), so a crash never leaves half a quarantine
visible. Each decision has its own folder: the quarantine is append-only, one partition per
rollback. Documents are *pending* until an operator confirms them
(:mod:`pretrain.quarantine.review`); only confirmed ones leave the mixture.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.packing.ledger import BatchPlan
from pretrain.quarantine.config import QuarantineConfig, check_decision_id
from pretrain.quarantine.report import (
    document_fields,
    mixture_token_shares,
    source_view,
    source_view_md,
    worst_documents_md,
)
from pretrain.quarantine.scoring import score_window

DOCUMENTS = "documents.parquet"


@dataclass(frozen=True, kw_only=True)
class SkipRecord:
    """Everything a rollback decision says about the data it skipped."""

    decision_id: str
    branch: str
    window: tuple[int, int]
    spike_step: int
    packed_dir: str
    plan: BatchPlan
    healthy_checkpoint: str
    after_checkpoint: str | None = None
    documents_uri: str | None = None  # document texts for previews (the mixture's train split)

    def __post_init__(self) -> None:
        check_decision_id(self.decision_id)
        if not 1 <= self.window[0] < self.window[1]:
            raise ConfigError(f"skip window {self.window} must satisfy 1 <= start < end")


@dataclass(frozen=True, kw_only=True)
class QuarantineStats:
    decision_id: str
    window: tuple[int, int]
    num_documents: int
    tokens: int
    scored_documents: int
    top_suspicion: float | None
    reference_loss: float  # the healthy checkpoint's loss on ordinary train data
    sources: list[dict[str, Any]]
    worst_md: str
    sources_md: str

    def as_metadata(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id,
            "steps": list(self.window),
            "num_documents": self.num_documents,
            "tokens": self.tokens,
            "scored_documents": self.scored_documents,
            "top_suspicion": self.top_suspicion,
            "reference_loss": self.reference_loss,
            "sources": self.sources,
            "worst_documents_md": self.worst_md,
            "source_view_md": self.sources_md,
        }


def quarantine_decision(
    record: SkipRecord, output_dir_uri: str, config: QuarantineConfig
) -> QuarantineStats:
    """Score the window's documents and write the decision's quarantine folder."""
    docs = score_window(
        record.packed_dir,
        record.plan,
        record.window,
        healthy_checkpoint=record.healthy_checkpoint,
        after_checkpoint=record.after_checkpoint,
        config=config,
    )
    reference = float((docs.schema.metadata or {})[b"reference_loss"])
    docs = _with_source_ids(docs, record.documents_uri)
    suspicion, doc_ids = docs["suspicion"].to_pylist(), docs["doc_id"].to_pylist()
    ranked = sorted(  # most suspicious first, unscored last, ties by id
        range(docs.num_rows),
        key=lambda i: (suspicion[i] is None, -(suspicion[i] or 0.0), doc_ids[i]),
    )
    docs = docs.take(pa.array(ranked, pa.int64()))
    n = docs.num_rows
    docs = docs.append_column("rank", pa.array(range(1, n + 1), pa.int32()))
    docs = docs.append_column("decision_id", pa.array([record.decision_id] * n, pa.string()))
    docs = docs.append_column("branch", pa.array([record.branch] * n, pa.string()))
    buf = io.BytesIO()
    pq.write_table(docs, buf, compression="zstd")
    info = {
        **{k: v for k, v in asdict(record).items() if k != "plan"},
        "plan": asdict(record.plan),
        "config": {k: v for k, v in asdict(config).items() if k != "pii"},
    }
    storage.replace_dir(
        {DOCUMENTS: buf.getvalue(), "decision.json": json.dumps(info, indent=2).encode()},
        output_dir_uri,
    )
    top = document_fields(record.documents_uri, docs["doc_id"].to_pylist()[: config.top_documents])
    texts = {doc: fields.get("text") for doc, fields in top.items()}
    rows = source_view(docs, mixture_token_shares(record.packed_dir))
    scores = [s for s in docs["suspicion"].to_pylist() if s is not None]
    return QuarantineStats(
        decision_id=record.decision_id,
        window=record.window,
        num_documents=n,
        tokens=int(pc.sum(docs["tokens"]).as_py() or 0),
        scored_documents=len(scores),
        top_suspicion=round(max(scores), 4) if scores else None,
        reference_loss=round(reference, 4),
        sources=rows,
        worst_md=worst_documents_md(docs, texts, config),
        sources_md=source_view_md(rows),
    )


def _with_source_ids(docs: pa.Table, documents_uri: str | None) -> pa.Table:
    """Fill ``source_id`` from the document table when the ledger predates provenance columns
    (and the documents carry it); otherwise it stays null."""
    if docs["source_id"].null_count < docs.num_rows:
        return docs
    found = document_fields(documents_uri, docs["doc_id"].to_pylist(), ("source_id",))
    ids = [found.get(d, {}).get("source_id") for d in docs["doc_id"].to_pylist()]
    ids = [None if v is None else str(v) for v in ids]
    column = docs.schema.get_field_index("source_id")
    return docs.set_column(column, "source_id", pa.array(ids, pa.string()))


def read_decision_documents(quarantine_root: str) -> pa.Table | None:
    """Every committed decision's documents under ``quarantine_root`` (None when there are none)."""
    if not storage.exists(quarantine_root):
        return None
    tables = []
    for uri in sorted(storage.list_files(quarantine_root, (DOCUMENTS,))):
        folder = uri[: -len(DOCUMENTS)].rstrip("/")
        hidden = folder.rsplit("/", 1)[-1].startswith(".")  # replace_dir's staging folders
        if not hidden and storage.is_committed(folder):
            tables.append(storage.read_table(uri))
    return pa.concat_tables(tables) if tables else None
