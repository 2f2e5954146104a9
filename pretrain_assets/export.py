"""``hf_export[key]``: a checkpoint as a Hugging Face ``LlamaForCausalLM`` folder (safetensors,
config.json, tokenizer files) (library: :mod:`pretrain.hf_export`; settings ``--export.*``)."""

from foundation.assets import Made, StageRun, stage_asset
from foundation.metadata import finish_output, to_metadata
from foundation.partitions import checkpoint_partitions
from pretrain.checkpoint.dcp import checkpoint_dir_for_key
from pretrain.hf_export import export_hf_llama

KEPT = ("key", "step", "tokens_seen", "dtype", "num_params", "num_tensors", "output_dir")


@stage_asset(
    "hf_export",
    stage="export",
    partitions=checkpoint_partitions,
    deps=["checkpoints", "tokenizer"],
    code_version="hf-export-v1",
    group="training",
)
def hf_export(run: StageRun) -> Made:
    """The checkpoint as a ``LlamaForCausalLM`` folder (safetensors, config.json, tokenizer)."""
    key, config = run.partition or "", run.library()
    checkpoint = str(checkpoint_dir_for_key(run.uri("runs"), key))
    out = run.uri("hf_export", key)
    ident = run.begin(out, config, [checkpoint, run.uri("tokenizer")])
    summary = export_hf_llama(checkpoint, run.uri("tokenizer"), out, dtype=config.dtype)
    values = {**{k: summary[k] for k in KEPT}, "files": summary["files"]}
    return Made(
        data_version=finish_output(out, ident),
        metadata=to_metadata(
            {**values, "identity": ident.version, "trained_on": summary["lineage"]}
        ),
    )
