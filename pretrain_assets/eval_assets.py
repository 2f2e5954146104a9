"""What is made from a checkpoint: ``eval_reports[key]``, ``eval_comparison`` and ``hf_export[key]``.

    checkpoints[key] + packed_tokens ─▶ eval_reports[key] ─▶ eval_comparison
    checkpoints[key] + tokenizer ─▶ hf_export[key]

``eval_comparison`` reads every materialized ``eval_reports`` partition, so it reflects the
reports that exist when it runs; the charts are embedded in its ``charts_md`` metadata
(Markdown with base64 PNG images, which the Dagster UI renders inline).
"""

from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    MaterializeResult,
    MetadataValue,
    asset,
)

from jobs.config import to_library
from jobs.partitions import checkpoint_partitions
from jobs.stages import STAGES
from pretrain import storage, verify
from pretrain.checkpoint.dcp import checkpoint_dir_for_key
from pretrain.eval import EvalConfig, compare_reports, evaluate_checkpoint
from pretrain.hf_export import HfExportConfig, export_hf_llama
from pretrain_assets.checkpoint_assets import checkpoints
from pretrain_assets.metadata import (
    begin_output,
    check_result,
    finish_output,
    stage_metadata,
    to_metadata,
)
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    EvalRunConfig = Any
else:
    EvalRunConfig = STAGES["eval"].config_class


@asset(
    partitions_def=checkpoint_partitions,
    deps=[checkpoints, "tokenizer"],
    group_name="training",
    code_version="eval-v3",  # v3: a capped source is scored over all its sequences
    check_specs=[AssetCheckSpec("metrics_finite", asset="eval_reports")],
)
def eval_reports(
    context: AssetExecutionContext, config: EvalRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Held-out loss, perplexity and bits per byte per source, zero-shot HellaSwag / ARC-Easy /
    BLiMP accuracy and sampled generations for one checkpoint (Markdown + JSON)."""
    key = context.partition_key
    library_config = to_library(config, EvalConfig)
    out = store.uri("eval_reports", key)
    checkpoint = str(checkpoint_dir_for_key(store.uri("runs"), key))
    inputs = [checkpoint, store.uri("packed_tokens"), store.uri("tokenizer")]
    ident = begin_output(context, store, out, library_config, inputs)
    stats = evaluate_checkpoint(checkpoint, inputs[1], out, library_config, tokenizer_uri=inputs[2])
    report_md = storage.read_bytes(storage.join(out, "report.md")).decode()
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out, report_md=report_md),
        check_results=[
            check_result("metrics_finite", verify.report_finite(storage.join(out, "report.json")))
        ],
    )


@asset(deps=[eval_reports], group_name="training", code_version="eval-comparison-v1")
def eval_comparison(context: AssetExecutionContext, store: ArtifactStore) -> MaterializeResult:
    """Validation loss per source and task accuracy against step and tokens, across checkpoints."""
    keys = sorted(context.instance.get_materialized_partitions(AssetKey("eval_reports")))
    reports, out = [store.uri("eval_reports", key) for key in keys], store.uri("eval_comparison")
    ident = begin_output(context, store, out, {"reports": keys}, reports)
    comparison = compare_reports(reports, out)
    metadata = to_metadata(comparison.as_metadata())
    metadata["identity"] = ident.version
    metadata["charts_md"] = MetadataValue.md(comparison.charts_md())
    for name, uri in comparison.charts.items():
        metadata[f"chart/{name}"] = MetadataValue.path(uri)
    return MaterializeResult(data_version=finish_output(out, ident), metadata=metadata)


if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    HfExportRunConfig = Any
else:
    HfExportRunConfig = STAGES["export"].config_class


@asset(
    partitions_def=checkpoint_partitions,
    deps=[checkpoints, "tokenizer"],
    group_name="training",
    code_version="hf-export-v1",
)
def hf_export(
    context: AssetExecutionContext, config: HfExportRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """The checkpoint as a ``LlamaForCausalLM`` folder (safetensors, config.json, tokenizer)."""
    key = context.partition_key
    library_config = to_library(config, HfExportConfig)
    checkpoint, out = (
        str(checkpoint_dir_for_key(store.uri("runs"), key)),
        store.uri("hf_export", key),
    )
    ident = begin_output(context, store, out, library_config, [checkpoint, store.uri("tokenizer")])
    summary = export_hf_llama(checkpoint, store.uri("tokenizer"), out, dtype=library_config.dtype)
    keep = ("key", "step", "tokens_seen", "dtype", "num_params", "num_tensors", "output_dir")
    values = {**{k: summary[k] for k in keep}, "files": summary["files"]}
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=to_metadata(
            {**values, "identity": ident.version, "trained_on": summary["lineage"]}
        ),
    )
