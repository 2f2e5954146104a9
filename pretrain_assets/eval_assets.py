"""Assets downstream of checkpoints: ``eval_comparison`` (all eval reports, with PNG charts) and
``hf_export[key]`` (a checkpoint in the Hugging Face Llama format).

    checkpoints[key] ─▶ eval_reports[key] ─▶ eval_comparison
    checkpoints[key] + tokenizer ─▶ hf_export[key]

``eval_comparison`` reads every materialized ``eval_reports`` partition, so it reflects the
reports that exist when it runs; the charts are embedded in its ``charts_md`` metadata
(Markdown with base64 PNG images, which the Dagster UI renders inline).
"""

from dagster import (
    AssetExecutionContext,
    AssetKey,
    Config,
    MaterializeResult,
    MetadataValue,
    asset,
)

from pretrain.eval import compare_reports
from pretrain.hf_export import export_hf_llama
from pretrain.train.checkpoint import checkpoint_dir_for_key
from pretrain_assets.metadata import to_metadata
from pretrain_assets.model_assets import checkpoints
from pretrain_assets.partitions import checkpoint_partitions
from resources.storage import ArtifactStore


@asset(
    deps=["eval_reports"],
    group_name="training",
    code_version="eval-comparison-v1",
)
def eval_comparison(context: AssetExecutionContext, store: ArtifactStore) -> MaterializeResult:
    """Validation loss per source and task accuracy against step and tokens, across checkpoints."""
    keys = sorted(context.instance.get_materialized_partitions(AssetKey("eval_reports")))
    comparison = compare_reports(
        [store.uri("eval_reports", key) for key in keys], store.uri("eval_comparison")
    )
    metadata = to_metadata(comparison.as_metadata())
    metadata["charts_md"] = MetadataValue.md(comparison.charts_md())
    for name, uri in comparison.charts.items():
        metadata[f"chart/{name}"] = MetadataValue.path(uri)
    return MaterializeResult(metadata=metadata)


class HfExportConfig(Config):
    dtype: str = "float32"  # float32, bfloat16 or float16


@asset(
    partitions_def=checkpoint_partitions,
    deps=[checkpoints, "tokenizer"],
    group_name="training",
    code_version="hf-export-v1",
)
def hf_export(
    context: AssetExecutionContext, config: HfExportConfig, store: ArtifactStore
) -> MaterializeResult:
    """The checkpoint as a ``LlamaForCausalLM`` folder (safetensors, config.json, tokenizer)."""
    key = context.partition_key
    summary = export_hf_llama(
        str(checkpoint_dir_for_key(store.uri("runs"), key)),
        store.uri("tokenizer"),
        store.uri("hf_export", key),
        dtype=config.dtype,
    )
    keep = ("key", "step", "tokens_seen", "dtype", "num_params", "num_tensors", "output_dir")
    return MaterializeResult(
        metadata=to_metadata({**{k: summary[k] for k in keep}, "files": summary["files"]})
    )
