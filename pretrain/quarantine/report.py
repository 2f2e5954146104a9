"""What an operator and a data engineer read: the worst documents, and the sources behind them.

    shares = mixture_token_shares("art/packed_tokens")       # {"web": 0.91, "code": 0.09}
    rows = source_view(quarantined, shares)                   # per source: quarantined vs mixture
    print(source_view_md(rows))
    print(worst_documents_md(docs, texts, QuarantineConfig()))

A source whose share of the quarantined tokens is far above its share of the mixture
(``over_representation`` = quarantined share / mixture share) is the one to clean. Text previews
are PII-masked (:func:`pretrain.filters.pii.mask_pii`) before they reach the UI.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.filters.pii import mask_pii
from pretrain.quarantine.config import QuarantineConfig


def mixture_token_shares(packed_dir: str) -> dict[str, float]:
    """Share of the packed train tokens per source, from the ledger ({} without a ledger)."""
    uri = storage.join(packed_dir, "ledger.parquet")
    if not storage.exists(uri):
        return {}
    ledger = pq.read_table(
        storage.local_path(uri), columns=["source", "token_start", "token_end", "split"]
    )
    ledger = ledger.filter(pc.equal(ledger["split"], "train"))
    tokens = pc.subtract(ledger["token_end"], ledger["token_start"]).cast(pa.int64())
    per = (
        pa.table({"source": ledger["source"], "tokens": tokens})
        .group_by("source")
        .aggregate([("tokens", "sum")])
        .to_pylist()
    )
    total = sum(r["tokens_sum"] for r in per)
    return {r["source"]: r["tokens_sum"] / total for r in per} if total else {}


def source_view(quarantined: pa.Table, mixture_shares: dict[str, float]) -> list[dict[str, Any]]:
    """Per source (most over-represented first): quarantined documents and tokens, their share
    of all quarantined tokens, the source's share of the mixture, and the ratio of the two."""
    per: dict[str, dict[str, int]] = {}
    for source, tokens in zip(
        quarantined["source"].to_pylist(), quarantined["tokens"].to_pylist(), strict=True
    ):
        row = per.setdefault(source, {"documents": 0, "tokens": 0})
        row["documents"] += 1
        row["tokens"] += int(tokens)
    total = sum(r["tokens"] for r in per.values())
    rows = []
    for source in sorted(set(per) | set(mixture_shares)):
        got = per.get(source, {"documents": 0, "tokens": 0})
        share = got["tokens"] / total if total else 0.0
        mix = mixture_shares.get(source)
        rows.append(
            {
                "source": source,
                "quarantined_documents": got["documents"],
                "quarantined_tokens": got["tokens"],
                "quarantined_share": round(share, 4),
                "mixture_share": None if mix is None else round(mix, 4),
                "over_representation": round(share / mix, 2) if mix else None,
            }
        )
    return sorted(rows, key=lambda r: (-(r["over_representation"] or 0.0), r["source"]))


def source_view_md(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| source | quarantined docs | quarantined tokens | share of quarantine | "
        "share of mixture | over-representation |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        mix = "–" if r["mixture_share"] is None else f"{r['mixture_share']:.1%}"
        over = "–" if r["over_representation"] is None else f"{r['over_representation']:.2f}×"
        lines.append(
            f"| {r['source']} | {r['quarantined_documents']} | {r['quarantined_tokens']:,} | "
            f"{r['quarantined_share']:.1%} | {mix} | {over} |"
        )
    return "\n".join(lines)


def document_fields(
    documents_uri: str | None, doc_ids: Iterable[str], columns: tuple[str, ...] = ("text",)
) -> dict[str, dict[str, Any]]:
    """``columns`` (those the table has) of ``doc_ids`` from a document table (the mixture's
    ``train.parquet``), by id; {} when there is none (a packed dir made without a mixture)."""
    wanted = sorted(set(doc_ids))
    if documents_uri is None or not wanted or not storage.exists(documents_uri):
        return {}
    fs, path = storage.filesystem(documents_uri)
    names = pq.ParquetFile(path, filesystem=fs).schema_arrow.names
    present = [c for c in columns if c in names]
    table = pq.read_table(
        path, filesystem=fs, columns=["id", *present], filters=pc.field("id").isin(wanted)
    )
    return {row.pop("id"): row for row in table.to_pylist()}


def preview(text: str | None, config: QuarantineConfig) -> str:
    """One Markdown-safe line: PII masked, whitespace folded, cut at ``preview_chars``."""
    if text is None or config.preview_chars == 0:
        return ""
    masked, _ = mask_pii(text[: config.preview_chars * 4], config.pii)
    line = " ".join(masked.split())
    cut = line[: config.preview_chars] + ("…" if len(line) > config.preview_chars else "")
    return cut.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def worst_documents_md(
    docs: pa.Table, texts: dict[str, str | None], config: QuarantineConfig
) -> str:
    """The ``top_documents`` most suspicious documents as a Markdown table with previews."""
    ranked = sorted(
        docs.to_pylist(),
        key=lambda d: (d["suspicion"] is None, -(d["suspicion"] or 0.0), d["doc_id"]),
    )[: config.top_documents]
    lines = [
        "| # | document | source | suspicion | loss | tokens | steps | preview (PII masked) |",
        "|---:|---|---|---:|---:|---:|---|---|",
    ]
    for rank, d in enumerate(ranked, start=1):
        score = "unscored" if d["suspicion"] is None else f"{d['suspicion']:+.3f}"
        loss = "–" if d["loss"] is None else f"{d['loss']:.3f}"
        steps = ",".join(str(s) for s in d["steps"])
        lines.append(
            f"| {rank} | `{d['doc_id']}` | {d['source']} | {score} | {loss} | {d['tokens']} | "
            f"{steps} | {preview(texts.get(d['doc_id']), config)} |"
        )
    return "\n".join(lines)
