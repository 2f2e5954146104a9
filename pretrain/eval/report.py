"""Evaluation results and their rendering (torch-free).

``EvalStats`` is what :func:`pretrain.eval.evaluate_checkpoint` returns and what the Dagster
asset turns into metadata with ``as_metadata()``; ``report.json`` holds the same numbers plus
lineage, ``report.md`` tables a person reads::

    | source  | sequences | tokens | loss   | perplexity | bits/token | bits/byte |
    |---------|-----------|--------|--------|------------|------------|-----------|
    | code    |        64 |  8,128 | 2.3012 |      9.985 |     3.3200 |    0.9120 |

    | task      | examples | acc    | acc_norm | ± stderr | chance | P(correct) | ...
    | blimp     |      200 | 0.6150 |   0.5900 |   0.0345 | 0.5000 |
    | hellaswag | skipped: ~/.cache/pretrain/eval/hellaswag_val_10042.jsonl.gz not found |

``tasks`` maps a task name to ``{"status": "ok", "acc": ...}`` or ``{"status": "skipped",
"reason": ...}``: a task whose file is absent is reported as skipped, never dropped.
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
    num_bytes: int | None = None  # UTF-8 bytes the scored tokens cover (None: no tokenizer)
    bits_per_byte: float | None = None

    @classmethod
    def from_sums(
        cls,
        source: str,
        num_sequences: int,
        num_tokens: int,
        loss_sum: float,
        num_bytes: int | None = None,
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
            num_bytes=num_bytes,
            bits_per_byte=loss_sum / math.log(2) / num_bytes if num_bytes else None,
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
    tokens_seen: int | None = None
    tasks: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    generations: tuple[dict[str, Any], ...] = ()
    empty_sources: tuple[str, ...] = ()  # val sources with no packed sequence: not scored

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
            "tokens_seen": self.tokens_seen,
            "bits_per_byte": self.overall.bits_per_byte,
        }
        for s in self.per_source:
            meta[f"loss/{s.source}"] = s.loss
            meta[f"perplexity/{s.source}"] = s.perplexity
            meta[f"bits_per_byte/{s.source}"] = s.bits_per_byte
        for name, task in self.tasks.items():
            if task["status"] == "ok":
                meta[f"acc/{name}"] = task["acc"]
                meta[f"acc_norm/{name}"] = task["acc_norm"]
                meta[f"correct_prob/{name}"] = task["correct_prob"]
                meta[f"correct_logprob_per_byte/{name}"] = task["correct_logprob_per_byte"]
                meta[f"z_vs_chance/{name}"] = task["z_vs_chance"]
        meta["val_sources_empty"] = list(self.empty_sources)
        meta["tasks_skipped"] = sorted(n for n, t in self.tasks.items() if t["status"] != "ok")
        return meta

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def render_markdown(stats: EvalStats, lineage: dict[str, Any]) -> str:
    lines = [
        f"# Evaluation of `{stats.checkpoint_key}`",
        "",
        f"- checkpoint: `{stats.checkpoint_dir}` (branch `{stats.branch}`, step {stats.step})",
        f"- checkpoint identity: `{lineage.get('checkpoint_identity')}`, trained on packed_tokens "
        f"`{lineage.get('trained_on_packed_tokens_version')}` with run config sha256 "
        f"`{lineage.get('train_config_sha256')}`",
        f"- scored on `{lineage.get('packed_dir')}`; tokenizer sha256: "
        f"`{lineage.get('tokenizer_sha256')}`",
        f"- code version: `{lineage.get('code_version')}`",
        "",
        "## Held-out loss",
        "",
        "| source | sequences | tokens | loss | perplexity | bits/token | bits/byte |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in (*stats.per_source, stats.overall):
        name = f"**{s.source}**" if s.source == OVERALL else s.source
        bpb = "n/a" if s.bits_per_byte is None else f"{s.bits_per_byte:.4f}"
        lines.append(
            f"| {name} | {s.num_sequences:,} | {s.num_tokens:,} | {s.loss:.4f} | "
            f"{s.perplexity:.3f} | {s.bits_per_token:.4f} | {bpb} |"
        )
    for source in stats.empty_sources:
        lines.append(f"| {source} | 0 | not scored: no packed val sequence | | | | |")
    if stats.tasks:
        lines += ["", "## Zero-shot multiple choice", ""]
        lines += [
            "| task | examples | acc | acc_norm | ± stderr | chance | z vs chance | P(correct) "
            "| log P(correct)/byte | truncated requests |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, t in stats.tasks.items():
            if t["status"] == "ok":
                lines.append(
                    f"| {name} | {t['num_examples']:,} | {t['acc']:.4f} | {t['acc_norm']:.4f} | "
                    f"{t['acc_stderr']:.4f} | {t['chance']:.4f} | {t['z_vs_chance']:+.1f} | "
                    f"{t['correct_prob']:.4f} | {t['correct_logprob_per_byte']:.4f} | "
                    f"{t['num_truncated']:,} |"
                )
            else:
                lines.append(f"| {name} | skipped: {t['reason']} | | | | | | | | |")
    if stats.generations:
        lines += ["", "## Generations", ""]
        for g in stats.generations:
            lines += [
                f"**prompt** `{g['prompt']!r}`",
                "",
                "```",
                g["prompt"] + g["completion"],
                "```",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"
