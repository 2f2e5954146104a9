"""The filter funnel: documents and characters kept/dropped per reason, and its checks.

:class:`FilterStats` is what one shard's filter run returns (and writes to ``stats.json``);
its constructor refuses numbers that do not reconcile. :func:`funnel_markdown` renders one
or many shards as a Markdown table with a bar per reason (Dagster shows it as metadata);
:func:`funnel_reconciles` and :func:`drop_rates_within` recompute the asset checks from the
written files::

    from pretrain.filters.funnel import aggregate, funnel_markdown, funnel_reconciles
    print(funnel_markdown(aggregate([stats_a, stats_b])))
    funnel_reconciles(raw_uri, out_dir_uri).passed  # True

Characters are counted on the raw text; cleaning (normalization, C4 line removal, PII
placeholders) changes the kept text, reported separately as ``chars_out``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc

from pretrain import storage
from pretrain.checks import CheckOutcome, count_rows
from pretrain.errors import DataError


@dataclass(frozen=True, kw_only=True)
class FilterStats:
    documents_in: int
    kept: int
    dropped: dict[str, int]
    chars_in: int
    chars_kept: int  # raw characters of the kept documents
    dropped_chars: dict[str, int] = field(default_factory=dict)
    chars_out: int = 0  # characters of the kept documents after cleaning
    chars_removed: dict[str, int] = field(default_factory=dict)  # by line rule, kept documents
    chunks_added: int = 0  # extra rows from long documents split into chunks
    kept_by_source: dict[str, int] = field(default_factory=dict)
    kept_by_language: dict[str, int] = field(default_factory=dict)
    pii_masked: dict[str, int] = field(default_factory=dict)  # kept text, by type
    # every other masked span: "<kept|rejected>.<column>.<type>" (text, url, metadata,
    # source_id, detail), and "<kept|rejected>.metadata.dropped_keys"
    pii_masked_columns: dict[str, int] = field(default_factory=dict)
    mojibake_repaired: int = 0
    # documents the toxicity rule passed without a sentence model for their language (word
    # lists only), per language: unscored, not clean
    toxicity_unscored: dict[str, int] = field(default_factory=dict)
    # every document the toxicity rule judged (kept or dropped), by what could flag it:
    # "models: en", "word lists: de", "none: sw" (pretrain.filters.toxicity_evidence)
    toxicity_judged_by: dict[str, int] = field(default_factory=dict)
    reason_order: tuple[str, ...] = ()  # reasons in pipeline order, for the funnel chart

    def __post_init__(self) -> None:
        if self.documents_in + self.chunks_added != self.kept + sum(self.dropped.values()):
            raise DataError(
                f"filter accounting broken: {self.documents_in} in + {self.chunks_added} "
                f"chunks added != {self.kept} kept + {sum(self.dropped.values())} dropped"
            )
        if self.dropped_chars and self.chars_in != self.chars_kept + sum(
            self.dropped_chars.values()
        ):
            raise DataError(
                f"filter char accounting broken: {self.chars_in} in != {self.chars_kept} kept + "
                f"{sum(self.dropped_chars.values())} dropped"
            )

    def as_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "documents_in": self.documents_in,
            "kept": self.kept,
            "dropped": sum(self.dropped.values()),
            "chunks_added": self.chunks_added,
            "chars_removed": sum(self.chars_removed.values()),
            "keep_rate": (
                round((self.kept - self.chunks_added) / self.documents_in, 6)
                if self.documents_in
                else 0.0
            ),
            "chars_in": self.chars_in,
            "chars_kept": self.chars_kept,
            "chars_out": self.chars_out,
            "mojibake_repaired": self.mojibake_repaired,
            "toxicity_unscored": sum(self.toxicity_unscored.values()),
        }
        out.update({f"dropped_{reason}": n for reason, n in sorted(self.dropped.items())})
        out.update({f"chars_removed_{rule}": n for rule, n in sorted(self.chars_removed.items())})
        out.update({f"kept_{src}": n for src, n in sorted(self.kept_by_source.items())})
        out.update({f"pii_{kind}": n for kind, n in sorted(self.pii_masked.items())})
        out.update({f"pii_{key}": n for key, n in sorted(self.pii_masked_columns.items())})
        top = sorted(self.kept_by_language.items(), key=lambda kv: (-kv[1], str(kv[0])))[:10]
        out["top_languages"] = ", ".join(f"{lang}:{n}" for lang, n in top)
        unscored = sorted(self.toxicity_unscored.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        out["toxicity_unscored_languages"] = ", ".join(f"{lang}:{n}" for lang, n in unscored)
        judged = sorted(self.toxicity_judged_by.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        out["toxicity_judged_by"] = "; ".join(f"{by} {n}" for by, n in judged)
        out["funnel_md"] = funnel_markdown(self)
        return out


def aggregate(stats: list[FilterStats]) -> FilterStats:
    """One funnel over many shards (sums; reasons ordered as in the first shard that has them)."""

    def total(attr: str) -> dict[str, int]:
        counter: Counter[str] = Counter()
        for s in stats:
            counter.update(getattr(s, attr))
        return dict(sorted(counter.items()))

    order = tuple(dict.fromkeys(r for s in stats for r in s.reason_order))
    return FilterStats(
        documents_in=sum(s.documents_in for s in stats),
        kept=sum(s.kept for s in stats),
        dropped=total("dropped"),
        chars_in=sum(s.chars_in for s in stats),
        chars_kept=sum(s.chars_kept for s in stats),
        dropped_chars=total("dropped_chars"),
        chars_out=sum(s.chars_out for s in stats),
        chars_removed=total("chars_removed"),
        chunks_added=sum(s.chunks_added for s in stats),
        kept_by_source=total("kept_by_source"),
        kept_by_language=total("kept_by_language"),
        pii_masked=total("pii_masked"),
        pii_masked_columns=total("pii_masked_columns"),
        mojibake_repaired=sum(s.mojibake_repaired for s in stats),
        toxicity_unscored=total("toxicity_unscored"),
        toxicity_judged_by=total("toxicity_judged_by"),
        reason_order=order,
    )


def stats_from_json(data: dict[str, Any]) -> FilterStats:
    fields = FilterStats.__dataclass_fields__
    values = {k: v for k, v in data.items() if k in fields}
    values["reason_order"] = tuple(values.get("reason_order", ()))
    return FilterStats(**values)


def funnel_markdown(stats: FilterStats, width: int = 30) -> str:
    """Rows in pipeline order: reason, documents and characters dropped, documents remaining."""
    reasons = [r for r in stats.reason_order if r in stats.dropped]
    reasons += sorted(set(stats.dropped) - set(reasons))
    lines = [
        "| step | docs dropped | chars dropped | docs left | |",
        "|---|---:|---:|---:|---|",
        f"| input | | | {stats.documents_in} | {'█' * width} |",
    ]
    left = stats.documents_in
    for reason in reasons:
        left -= stats.dropped[reason]
        bar = "█" * round(width * left / stats.documents_in) if stats.documents_in else ""
        chars = stats.dropped_chars.get(reason, "")
        lines.append(f"| {reason} | {stats.dropped[reason]} | {chars} | {left} | {bar} |")
    lines.append(f"| **kept** | | | **{stats.kept - stats.chunks_added}** | |")
    if stats.chunks_added:
        lines.append(f"| split into chunks (+rows) | | | +{stats.chunks_added} | |")
    if stats.toxicity_unscored:
        top = sorted(stats.toxicity_unscored.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        languages = ", ".join(f"{lang} {n}" for lang, n in top)
        lines.append(
            f"| passed toxicity **unscored** (no model for: {languages}) | | | "
            f"{sum(stats.toxicity_unscored.values())} | |"
        )
    if stats.chars_removed:
        lines += ["", "| line rule | chars removed from kept documents |", "|---|---:|"]
        lines += [f"| {rule} | {n} |" for rule, n in sorted(stats.chars_removed.items())]
    masked = {f"kept.text.{kind}": n for kind, n in stats.pii_masked.items()}
    masked.update(stats.pii_masked_columns)
    if masked:
        lines += ["", "| PII masked (rows . column . type) | spans |", "|---|---:|"]
        lines += [f"| {key} | {n} |" for key, n in sorted(masked.items())]
    return "\n".join(lines)


def funnel_reconciles(raw_documents_uri: str, output_dir_uri: str) -> CheckOutcome:
    """Raw rows == kept rows + reject rows, and reject reasons match stats.json, from the files."""
    rows_in = count_rows(raw_documents_uri)
    kept = count_rows(storage.join(output_dir_uri, "documents.parquet"))
    rejects_uri = storage.join(output_dir_uri, "rejects.parquet")
    reasons = storage.read_table(rejects_uri, columns=["reason"]).column("reason")
    by_reason = {r["values"]: r["counts"] for r in pc.value_counts(reasons).to_pylist()}
    stats = storage.read_json(storage.join(output_dir_uri, "stats.json"))
    chunks = stats.get("chunks_added", 0)
    passed = rows_in + chunks == kept + len(reasons) and by_reason == stats["dropped"]
    return CheckOutcome(
        passed,
        f"in={rows_in} (+{chunks} chunks) kept={kept} rejected={len(reasons)}; per-reason counts "
        f"{'match' if by_reason == stats['dropped'] else 'differ from'} stats.json",
        {"rows_in": rows_in, "kept": kept, "rejected": len(reasons)},
    )


def drop_rates_within(
    stats: FilterStats, max_rate: float, overrides: dict[str, float] | None = None
) -> CheckOutcome:
    """Every reason's share of the input stays at or under its bound (a warning check)."""
    overrides = overrides or {}
    total = max(1, stats.documents_in)
    rates = {r: round(n / total, 4) for r, n in stats.dropped.items()}
    over = {r: v for r, v in rates.items() if v > overrides.get(r, max_rate)}
    return CheckOutcome(
        not over,
        f"reasons over their bound (default {max_rate}): {over or 'none'}",
        {"drop_rates": rates},
    )
