"""Cross-checkpoint comparison: held-out loss per source and task accuracy against step and tokens.

    from pretrain.eval.compare import compare_reports
    comparison = compare_reports(
        ["art/eval_reports/b00-s000000150", "art/eval_reports/b00-s000000300"], "art/eval_comparison"
    )
    comparison.rows          # one dict per checkpoint: step, tokens_seen, loss/<src>, acc/<task>
    comparison.charts        # {"val_loss": "art/eval_comparison/val_loss.png", ...}
    comparison.charts_md()   # Markdown with the PNGs embedded as base64 data URIs

Reads each ``report.json`` (written by :func:`pretrain.eval.evaluate_checkpoint`), sorts by
branch and step, and writes ``comparison.json``, ``comparison.md`` and two PNG charts, each
with a panel against step and a panel against tokens seen: ``val_loss.png`` (one line per
source and branch) and ``task_accuracy.png`` (accuracy per task, with each task's chance level
dashed). The PNGs are rendered with matplotlib (Agg backend, no ``Software`` stamp), so the
same reports give byte-identical files. The Dagster UI renders Markdown metadata with an
``![](data:image/png;base64,…)`` image inline, which is what :meth:`Comparison.charts_md` gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pretrain import storage
from pretrain.charts import figure_png, png_markdown, pyplot
from pretrain.errors import DataError


@dataclass(frozen=True, kw_only=True)
class Comparison:
    output_dir_uri: str
    rows: tuple[dict[str, Any], ...]
    charts: dict[str, str] = field(default_factory=dict)  # name -> PNG URI
    png: dict[str, bytes] = field(default_factory=dict, repr=False)

    def charts_md(self) -> str:
        return "\n\n".join(png_markdown(name, blob) for name, blob in self.png.items())

    def as_metadata(self) -> dict[str, Any]:
        last = self.rows[-1]
        return {
            "num_checkpoints": len(self.rows),
            "checkpoints": [r["checkpoint_key"] for r in self.rows],
            "latest_checkpoint": last["checkpoint_key"],
            "latest_val_loss": last["val_loss"],
            "chart_uris": dict(self.charts),
            "comparison_uri": storage.join(self.output_dir_uri, "comparison.json"),
        }


def _row(report: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "checkpoint_key": report["checkpoint_key"],
        "branch": report["branch"],
        "step": report["step"],
        "tokens_seen": report.get("tokens_seen"),
        "val_loss": report["overall"]["loss"],
        "bits_per_byte": report["overall"].get("bits_per_byte"),
    }
    for source in report["per_source"]:
        row[f"loss/{source['source']}"] = source["loss"]
    for name, task in report.get("tasks", {}).items():
        if task.get("status") == "ok":
            row[f"acc/{name}"] = task["acc"]
            row[f"chance/{name}"] = task["chance"]
    return row


def _plot(rows: Sequence[dict[str, Any]], prefix: str, ylabel: str) -> bytes | None:
    """One figure, panels against step and tokens seen; None when no row has ``prefix`` keys."""
    plt = pyplot()
    names = sorted({k.split("/", 1)[1] for r in rows for k in r if k.startswith(prefix + "/")})
    if not names:
        return None
    branches = sorted({r["branch"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), dpi=80)
    for ax, x_key, x_label in ((axes[0], "step", "step"), (axes[1], "tokens_seen", "tokens")):
        for name in names:
            for branch in branches:
                pts = [
                    (r[x_key], r[f"{prefix}/{name}"])
                    for r in rows
                    if r["branch"] == branch and f"{prefix}/{name}" in r and r[x_key] is not None
                ]
                if not pts:
                    continue
                label = name if len(branches) == 1 else f"{name} ({branch})"
                (line,) = ax.plot(*zip(*pts, strict=True), marker="o", label=label)
                chance = [r.get(f"chance/{name}") for r in rows if r["branch"] == branch]
                if prefix == "acc" and chance[0] is not None:
                    ax.axhline(chance[0], linestyle="--", color=line.get_color(), linewidth=0.8)
        ax.set_xlabel(x_label)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return figure_png(fig)


def _markdown(rows: Sequence[dict[str, Any]]) -> str:
    columns = ["checkpoint_key", "step", "tokens_seen", "val_loss", "bits_per_byte"]
    columns += sorted({k for r in rows for k in r if k.startswith(("loss/", "acc/"))})
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = [r.get(c) for c in columns]
        lines.append(
            "| "
            + " | ".join(
                "" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v) for v in cells
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def compare_reports(report_dir_uris: Sequence[str], output_dir_uri: str) -> Comparison:
    """Read each ``<dir>/report.json``, write the comparison files; refuses an empty list."""
    if not report_dir_uris:
        raise DataError("no eval reports to compare; materialize eval_reports first")
    reports = []
    for uri in report_dir_uris:
        path = storage.join(uri, "report.json")
        if not storage.exists(path):
            raise DataError(f"{path} does not exist; evaluate that checkpoint first")
        reports.append(storage.read_json(path))
    rows = tuple(sorted((_row(r) for r in reports), key=lambda r: (r["branch"], r["step"])))
    charts, pngs = {}, {}
    for name, prefix, ylabel in (
        ("val_loss", "loss", "validation loss (nats/token)"),
        ("task_accuracy", "acc", "accuracy"),
    ):
        blob = _plot(rows, prefix, ylabel)
        if blob is not None:
            charts[name] = storage.join(output_dir_uri, f"{name}.png")
            pngs[name] = blob
            storage.write_bytes(blob, charts[name])
    storage.write_json(
        {"rows": list(rows), "charts": charts}, storage.join(output_dir_uri, "comparison.json")
    )
    storage.write_bytes(_markdown(rows).encode(), storage.join(output_dir_uri, "comparison.md"))
    return Comparison(output_dir_uri=output_dir_uri, rows=rows, charts=charts, png=pngs)
