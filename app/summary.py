"""The demo's closing summary, built from the metadata Dagster recorded for each asset."""

import json
from typing import Any

from pretrain import storage


def _total(rows: list[dict[str, dict[str, Any]]], asset: str, key: str) -> int:
    return sum(int(r.get(asset, {}).get(key, 0)) for r in rows)


def summary_figures(results: dict[str, Any]) -> dict[str, Any]:
    shards, deduped = results["shards"], results["deduped"]
    mixture = results["corpus"]["data_mixture"]
    packed = results["corpus"]["packed_tokens"]
    trained = results["trained"]["train_model"]
    evaluation = results["eval"]["eval_reports"]
    return {
        "raw_documents": _total(shards, "raw_shards", "documents"),
        "raw_rejected": _total(shards, "raw_shards", "rejected"),
        "filter_in": _total(shards, "filtered_shards", "documents_in"),
        "filter_kept": _total(shards, "filtered_shards", "kept"),
        "dedup_in": _total(deduped, "deduped_shards", "documents_in"),
        "dedup_kept": _total(deduped, "deduped_shards", "kept"),
        "train_docs": int(mixture["train_docs"]),
        "val_docs": int(mixture["val_docs"]),
        "tokens_packed": int(packed["tokens_packed"]),
        "steps_trained": int(trained.get("step", 0)),
        "final_train_loss": trained.get("final_loss"),
        "val_loss": evaluation.get("val_loss"),
        "val_perplexity": evaluation.get("perplexity"),
        "tasks": {
            k.removeprefix("acc/"): v
            for k, v in evaluation.items()
            if k.startswith("acc/") and isinstance(v, float)
        },
        "tasks_skipped": _skipped(evaluation.get("tasks_skipped")),
        "eval_fetch": results.get("eval_fetch", ""),
        "z_vs_chance": {
            k.removeprefix("z_vs_chance/"): v
            for k, v in evaluation.items()
            if k.startswith("z_vs_chance/") and isinstance(v, float)
        },
    }


def _skipped(value: Any) -> list[str]:
    """The eval report's ``tasks_skipped`` (a list, or its JSON/metadata text form)."""
    value = getattr(value, "value", value)
    if isinstance(value, str):
        value = json.loads(value) if value.startswith("[") else [value]
    return sorted(value or [])


def format_summary(results: dict[str, Any], *, wall_s: float) -> str:
    f = summary_figures(results)
    report = storage.join(results["root"], "eval_reports", results["final_checkpoint"], "report.md")
    loss = f["final_train_loss"]
    lines = [
        "",
        "pretrain demo: the whole asset graph materialized",
        f"  raw documents        {f['raw_documents']:>10,}  (+{f['raw_rejected']} unreadable, with reasons)",
        f"  filtered: kept       {f['filter_kept']:>10,} of {f['filter_in']:,}",
        f"  deduped: kept        {f['dedup_kept']:>10,} of {f['dedup_in']:,}",
        f"  mixture              {f['train_docs']:>10,} train docs, {f['val_docs']:,} validation docs",
        f"  tokens packed        {f['tokens_packed']:>10,}",
        f"  steps trained        {f['steps_trained']:>10,}",
        f"  final train loss     {loss:>10.4f}"
        if loss is not None
        else "  final train loss     n/a",
        f"  validation loss      {f['val_loss']:>10.4f}",
        f"  validation ppl       {f['val_perplexity']:>10.2f}",
        *(
            f"  {task + ' acc':<20} {acc:>10.3f}  (z vs chance {f['z_vs_chance'].get(task, 0):+.1f})"
            for task, acc in sorted(f["tasks"].items())
        ),
        *(
            f"  {task + ' acc':<20} {'not scored':>10}  (no task file: `pretrain evals fetch`)"
            for task in f["tasks_skipped"]
        ),
        *([f"  {f['eval_fetch']}"] if f["eval_fetch"] else []),
        *_search_lines(results.get("experiments") or {}),
        f"  wall time            {wall_s:>10.1f} s",
        f"eval report: {report}",
        "open the UI with `make ui` to see every asset, run and check.",
    ]
    return "\n".join(lines)


def _search_lines(experiments: dict[str, Any]) -> list[str]:
    search = experiments.get("search") or {}
    if not search:
        return []
    weights = getattr(search.get("proposed_weights"), "value", search.get("proposed_weights"))
    weights = json.loads(weights) if isinstance(weights, str) else weights or {}
    shares = ", ".join(f"{k} {v:.2f}" for k, v in sorted(weights.items()))
    chosen = getattr(search.get("chosen_by"), "value", search.get("chosen_by")) or "regression"
    return [
        f"  mixture search       {experiments['proxies']:>10} proxies; proposed {shares} "
        f"(chosen by: {chosen})",
        f"  (held-out Spearman {float(search['heldout_spearman_lightgbm']):.2f} LightGBM, "
        f"{float(search['heldout_spearman_linear']):.2f} linear; proxy_tiny only shows the path)",
    ]
