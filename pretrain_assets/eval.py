"""Evaluation (library: :mod:`pretrain.eval`; settings ``--eval.*``): ``eval_reports[key]`` for
one checkpoint, ``eval_comparison`` across them.

    checkpoints[key] + packed_tokens ─▶ eval_reports[key] ─▶ eval_comparison

``eval_comparison`` reads every materialized ``eval_reports`` partition, so it reflects the
reports that exist when it runs; the charts are embedded in its ``charts_md`` metadata
(Markdown with base64 PNG images, which the Dagster UI renders inline).
"""

from dagster import AssetKey, MetadataValue

from foundation.assets import ERROR, Made, StageRun, stage_asset
from foundation.metadata import finish_output, to_metadata
from foundation.partitions import checkpoint_partitions
from pretrain import storage, verify
from pretrain.checkpoint.dcp import checkpoint_dir_for_key
from pretrain.eval import compare_reports, evaluate_checkpoint


@stage_asset(
    "eval_reports",
    stage="eval",
    partitions=checkpoint_partitions,
    deps=["checkpoints", "tokenizer"],
    code_version="eval-v3",  # v3: a capped source is scored over all its sequences
    group="training",
    checks={"metrics_finite": ERROR},
)
def eval_reports(run: StageRun) -> Made:
    """Held-out loss, perplexity and bits per byte per source, zero-shot HellaSwag / ARC-Easy /
    BLiMP accuracy and sampled generations for one checkpoint (Markdown + JSON)."""
    key, config = run.partition or "", run.library()
    out = run.uri("eval_reports", key)
    checkpoint = str(checkpoint_dir_for_key(run.uri("runs"), key))
    inputs = [checkpoint, run.uri("packed_tokens"), run.uri("tokenizer")]
    ident = run.begin(out, config, inputs)
    stats = evaluate_checkpoint(checkpoint, inputs[1], out, config, tokenizer_uri=inputs[2])
    report_md = storage.read_bytes(storage.join(out, "report.md")).decode()
    finite = verify.report_finite(storage.join(out, "report.json"))
    return run.made(out, ident, stats, config, report_md=report_md,
                    checks={"metrics_finite": finite})  # fmt: skip


@stage_asset(
    "eval_comparison", deps=["eval_reports"], code_version="eval-comparison-v1", group="training"
)
def eval_comparison(run: StageRun) -> Made:
    """Validation loss per source and task accuracy against step and tokens, across checkpoints."""
    keys = sorted(run.context.instance.get_materialized_partitions(AssetKey("eval_reports")))
    reports, out = [run.uri("eval_reports", key) for key in keys], run.uri("eval_comparison")
    ident = run.begin(out, {"reports": keys}, reports)
    comparison = compare_reports(reports, out)
    metadata = to_metadata(comparison.as_metadata())
    metadata["identity"] = ident.version
    metadata["charts_md"] = MetadataValue.md(comparison.charts_md())
    for name, uri in comparison.charts.items():
        metadata[f"chart/{name}"] = MetadataValue.path(uri)
    return Made(data_version=finish_output(out, ident), metadata=metadata)
