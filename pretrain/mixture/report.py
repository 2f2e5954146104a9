"""What the mixture did: per-source and per-stage stats, and the realized-vs-target share table.

    stats = build_mixture(...)
    print(stats.share_table_md())        # Markdown table with a text bar chart per source
    stats.as_metadata()["share_table_md"]  # the Dagster layer shows ``*_md`` keys as Markdown

The chart is drawn with block characters so that it renders anywhere Markdown does (the Dagster
UI, a terminal, a PR comment) without a plotting library: one row per source, ``█`` for the
realized share and ``│`` at the target share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

CHART_WIDTH = 40


@dataclass(frozen=True, kw_only=True)
class SourceMix:
    """What the mixture did with one source (characters; tokens are counted at packing)."""

    target_share: float
    realized_share: float
    epochs: float
    needed_epochs: float  # epochs the target asks for (-1 when the source has no train text)
    epoch_cap: float
    train_docs: int
    train_chars: int
    val_docs: int
    val_chars: int
    available_train_docs: int
    available_train_chars: int
    mean_quality_available: float | None = None
    mean_quality_train: float | None = None


@dataclass(frozen=True, kw_only=True)
class StageMix:
    """One curriculum stage: its budget fraction and shares (target and realized)."""

    name: str
    fraction: float
    train_chars: int
    target_shares: dict[str, float]
    realized_shares: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class MixtureStats:
    train_docs: int
    train_chars: int
    val_docs: int
    val_chars: int
    budget_chars: int | None
    quality_alpha: float
    sources: dict[str, SourceMix]
    stages: tuple[StageMix, ...]
    warnings: tuple[str, ...] = ()
    too_small: tuple[str, ...] = ()
    decontam: dict = field(default_factory=dict)
    quarantine: dict = field(default_factory=dict)  # what the confirmed quarantine excluded

    def with_extras(self, **changes: Any) -> MixtureStats:
        return replace(self, **changes)

    def to_json(self) -> dict:
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        out["too_small"] = list(self.too_small)
        out["stages"] = [asdict(s) for s in self.stages]
        return out

    def share_table_md(self) -> str:
        """Realized vs target share per source, as a Markdown table with a bar chart."""
        lines = [
            "| source | target | realized | epochs (cap) | train docs | chart (█ realized, │ target) |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, mix in self.sources.items():
            flag = " ⚠ too small" if name in self.too_small else ""
            lines.append(
                f"| {name}{flag} | {mix.target_share:.1%} | {mix.realized_share:.1%} | "
                f"{mix.epochs:.2f} ({mix.epoch_cap:g}) | {mix.train_docs} | "
                f"`{_bar(mix.realized_share, mix.target_share)}` |"
            )
        if len(self.stages) > 1:
            lines += [
                "",
                "| stage | fraction | train chars | realized shares |",
                "|---|---:|---:|---|",
            ]
            for st in self.stages:
                shares = ", ".join(f"{s} {v:.1%}" for s, v in st.realized_shares.items())
                lines.append(f"| {st.name} | {st.fraction:.0%} | {st.train_chars} | {shares} |")
        return "\n".join(lines)

    def as_metadata(self) -> dict:
        decontam = self.decontam or {}
        return {
            "train_docs": self.train_docs,
            "train_chars": self.train_chars,
            "val_docs": self.val_docs,
            "val_chars": self.val_chars,
            "budget_chars": self.budget_chars,
            "quality_alpha": self.quality_alpha,
            "num_sources": len(self.sources),
            "num_warnings": len(self.warnings),
            "warnings": "\n".join(self.warnings),
            "too_small_sources": list(self.too_small),
            "decontaminated_docs": int(decontam.get("dropped", 0)),
            "decontam": decontam,
            "quarantined_docs": int((self.quarantine or {}).get("excluded_documents", 0)),
            "quarantine": self.quarantine or {"enabled": False},
            "sources": {name: asdict(mix) for name, mix in self.sources.items()},
            "stages": [asdict(s) for s in self.stages],
            "share_table_md": self.share_table_md(),
        }


def _bar(realized: float, target: float, width: int = CHART_WIDTH) -> str:
    cells = [" "] * width
    for i in range(min(width, round(realized * width))):
        cells[i] = "█"
    mark = min(width - 1, round(target * width))
    cells[mark] = "│"
    return "".join(cells)
