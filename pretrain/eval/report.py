"""Evaluation results and their rendering (torch-free).

``EvalStats`` is what :func:`pretrain.eval.evaluate_checkpoint` returns and what the Dagster
asset turns into metadata with ``as_metadata()``; ``report.json`` holds the same numbers plus
lineage, ``report.md`` a table a person reads::

    | source  | sequences | tokens | loss   | perplexity | bits/token |
    |---------|-----------|--------|--------|------------|------------|
    | code    |        64 |  8,128 | 2.3012 |      9.985 |     3.3200 |
    | overall |       128 | 16,256 | 2.4100 |     11.134 |     3.4769 |
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from pretrain.errors import CheckpointError

OVERALL = "overall"


@dataclass(frozen=True, kw_only=True)
class SourceStats:
    source: str
    num_sequences: int
    num_tokens: int
    loss: float
    perplexity: float
    bits_per_token: float

    @classmethod
    def from_sums(
        cls, source: str, num_sequences: int, num_tokens: int, loss_sum: float
    ) -> SourceStats:
        """Token-weighted mean loss; refuses empty or non-finite results."""
        if num_tokens <= 0:
            raise CheckpointError(
                f"val source {source!r} has no scored tokens; check the val split"
            )
        loss = loss_sum / num_tokens
        if not math.isfinite(loss):
            raise CheckpointError(
                f"checkpoint gives a non-finite validation loss ({loss}) on source {source!r}: "
                "the weights diverged; evaluate an earlier checkpoint"
            )
        perplexity = math.exp(loss) if loss < 700 else math.inf
        if not math.isfinite(perplexity):
            raise CheckpointError(f"perplexity overflows for source {source!r} (loss {loss:.1f})")
        return cls(
            source=source,
            num_sequences=num_sequences,
            num_tokens=num_tokens,
            loss=loss,
            perplexity=perplexity,
            bits_per_token=loss / math.log(2),
        )


@dataclass(frozen=True, kw_only=True)
class EvalStats:
    checkpoint_dir: str
    checkpoint_key: str
    branch: str
    step: int
    report_uri: str
    overall: SourceStats
    per_source: tuple[SourceStats, ...]

    def as_metadata(self) -> dict[str, Any]:
        """Flat, JSON-able numbers for Dagster metadata (``loss/<source>`` per source)."""
        meta: dict[str, Any] = {
            "checkpoint_key": self.checkpoint_key,
            "step": self.step,
            "branch": self.branch,
            "val_loss": self.overall.loss,
            "perplexity": self.overall.perplexity,
            "bits_per_token": self.overall.bits_per_token,
            "num_tokens": self.overall.num_tokens,
            "report_uri": self.report_uri,
        }
        for s in self.per_source:
            meta[f"loss/{s.source}"] = s.loss
            meta[f"perplexity/{s.source}"] = s.perplexity
        return meta

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def render_markdown(stats: EvalStats, lineage: dict[str, Any]) -> str:
    lines = [
        f"# Evaluation of `{stats.checkpoint_key}`",
        "",
        f"- checkpoint: `{stats.checkpoint_dir}` (branch `{stats.branch}`, step {stats.step})",
        f"- tokenizer sha256: `{lineage.get('tokenizer_sha256')}`",
        f"- code version: `{lineage.get('code_version')}`",
        "",
        "| source | sequences | tokens | loss | perplexity | bits/token |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in (*stats.per_source, stats.overall):
        name = f"**{s.source}**" if s.source == OVERALL else s.source
        lines.append(
            f"| {name} | {s.num_sequences:,} | {s.num_tokens:,} | {s.loss:.4f} | "
            f"{s.perplexity:.3f} | {s.bits_per_token:.4f} |"
        )
    return "\n".join(lines) + "\n"
