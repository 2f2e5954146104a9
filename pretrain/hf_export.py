"""Export a checkpoint to the Hugging Face Llama format: safetensors + config.json + tokenizer.

    python -m pretrain.hf_export runs/b00/step-00000600 art/tokenizer exports/hf/b00-s000000600

    from pretrain.hf_export import export_hf_llama
    export_hf_llama("runs/b00/step-00000600", "art/tokenizer", "exports/hf/b00-s000000600")

    from transformers import AutoTokenizer, LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained("exports/hf/b00-s000000600")
    tok = AutoTokenizer.from_pretrained("exports/hf/b00-s000000600")

Writes ``model.safetensors`` (HF parameter names), ``config.json`` (``model_type: llama``),
``generation_config.json``, ``tokenizer.json``, ``tokenizer_config.json``,
``special_tokens_map.json`` and ``pretrain_export.json`` (source checkpoint, step, tokenizer
sha256, lineage), then ``_COMMITTED``. Needs neither ``transformers`` nor a process group: the
checkpoint is loaded with :func:`pretrain.checkpoint.dcp.load_consolidated_model`, so any
FSDP world size works.

Conventions that make the logits match ``LlamaForCausalLM`` (``tests/unit/checkpoint/test_hf_export.py``):

- RoPE: our :func:`pretrain.model.transformer.apply_rope` rotates the two *halves* of each head
  with frequencies ``theta^(-2i/head_dim)`` — the same layout as HF's ``rotate_half``, so
  ``wq``/``wk`` are copied unpermuted (a checkpoint with interleaved pairs, Meta's original
  layout, would need the per-head ``(n, 2, d/2)`` → ``(n, d/2, 2)`` permutation here).
- Tied embeddings → ``tie_word_embeddings: true`` and no ``lm_head.weight`` in the file.
- ``qk_norm`` has no Llama equivalent (HF Llama has no per-head query/key norm): the export is
  refused with :class:`ConfigError` rather than writing a model that computes something else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from typing import Any

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.model.config import ModelConfig
from pretrain.settings import check_types

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True, kw_only=True)
class HfExportConfig:
    """The ``hf_export`` stage: ``dtype`` of the written weights (float32, bfloat16 or float16)."""

    dtype: str = "float32"

    def __post_init__(self) -> None:
        check_types(self)
        if self.dtype not in DTYPES:
            raise ConfigError(f"hf export dtype {self.dtype!r}; use one of {DTYPES}")


_LAYER_NAMES = {
    "attention.wq.weight": "self_attn.q_proj.weight",
    "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight",
    "attention.wo.weight": "self_attn.o_proj.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight",
    "feed_forward.w2.weight": "mlp.down_proj.weight",
    "attention_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}
_TOP_NAMES = {
    "tok_embeddings.weight": "model.embed_tokens.weight",
    "norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def check_exportable(cfg: ModelConfig) -> None:
    if cfg.qk_norm:
        raise ConfigError(
            "cannot export to Hugging Face Llama: the model uses qk_norm (RMSNorm on queries and "
            "keys), which LlamaForCausalLM does not have; export the native format with "
            "`python -m pretrain.train.export` or train with ModelConfig(qk_norm=False)"
        )


def hf_name(name: str) -> str:
    """Our parameter name → the ``LlamaForCausalLM`` one (``layers.3.attention.wq.weight`` →
    ``model.layers.3.self_attn.q_proj.weight``)."""
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    prefix, index, rest = name.split(".", 2)
    if prefix != "layers" or rest not in _LAYER_NAMES:
        raise ConfigError(f"parameter {name!r} has no Hugging Face Llama equivalent")
    return f"model.layers.{index}.{_LAYER_NAMES[rest]}"


def hf_config(cfg: ModelConfig, specials: dict[str, int], dtype: str) -> dict[str, Any]:
    """``config.json`` of ``LlamaForCausalLM`` for ``cfg`` (transformers 5 keys; ``rope_theta``
    kept at top level too for 4.x readers)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.ffn_hidden,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": cfg.init_std,
        "tie_word_embeddings": cfg.tie_embeddings,
        "bos_token_id": specials["bos"],
        "eos_token_id": specials["eos"],
        "pad_token_id": specials["pad"],
        "torch_dtype": dtype,
        "dtype": dtype,
        "use_cache": True,
    }


def _tokenizer_files(tokenizer_uri: str) -> tuple[dict[str, bytes], dict[str, int], str]:
    """The tokenizer's HF files (the two JSON configs are written when the folder lacks them)."""
    from pretrain.tokenizer import load_tokenizer, special_ids, tokenizer_file

    blob = storage.read_bytes(tokenizer_file(tokenizer_uri))
    tok = load_tokenizer(tokenizer_uri)
    ids = special_ids(tok)
    names = {k: tok.id_to_token(v) for k, v in ids.items()}
    specials_map = {f"{k}_token": names[k] for k in ("bos", "eos", "pad")}
    files = {
        "tokenizer.json": blob,
        "special_tokens_map.json": json.dumps(specials_map, indent=2, sort_keys=True).encode(),
        "tokenizer_config.json": json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                **specials_map,
                "add_bos_token": False,
                "add_eos_token": False,
                "clean_up_tokenization_spaces": False,
                "model_max_length": 1_000_000_000,
            },
            indent=2,
            sort_keys=True,
        ).encode(),
    }
    folder = tokenizer_uri.removesuffix("tokenizer.json").rstrip("/") or "."
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if storage.exists(storage.join(folder, name)):
            files[name] = storage.read_bytes(storage.join(folder, name))
    return files, ids, hashlib.sha256(blob).hexdigest()


def export_hf_llama(
    checkpoint_dir: str, tokenizer_uri: str, output_dir_uri: str, *, dtype: str = "float32"
) -> dict[str, Any]:
    """Write the HF Llama export of ``checkpoint_dir``; returns its summary (also in
    ``pretrain_export.json``). Refuses qk_norm models and a tokenizer the run did not use."""
    import torch
    from safetensors.torch import save

    from pretrain.checkpoint.dcp import load_consolidated_model, read_meta
    from pretrain.errors import DataError

    if dtype not in DTYPES:
        raise ConfigError(f"hf export dtype {dtype!r}; use one of {DTYPES}")
    meta = read_meta(checkpoint_dir)
    cfg = ModelConfig.from_dict(meta["config"]["model"])
    check_exportable(cfg)
    files, specials, tok_sha = _tokenizer_files(tokenizer_uri)
    trained_with = meta.get("lineage", {}).get("tokenizer_sha256")
    if trained_with and trained_with != tok_sha:
        raise DataError(
            f"{checkpoint_dir} was trained with tokenizer {trained_with[:12]}…, {tokenizer_uri} "
            f"is {tok_sha[:12]}…; export with the tokenizer the run used"
        )
    model = load_consolidated_model(checkpoint_dir, cfg)
    state = {
        hf_name(k): v.detach().to(getattr(torch, dtype)).contiguous()
        for k, v in model.state_dict().items()
        if not (cfg.tie_embeddings and k == "output.weight")
    }
    summary = {
        "source_checkpoint": str(checkpoint_dir),
        "key": meta.get("key"),
        "step": meta["step"],
        "tokens_seen": meta.get("tokens_seen"),
        "dtype": dtype,
        "num_tensors": len(state),
        "num_params": sum(t.numel() for t in state.values()),
        "tokenizer_sha256": tok_sha,
        "lineage": meta.get("lineage"),
    }
    generation = {"bos_token_id": specials["bos"], "eos_token_id": specials["eos"],
                  "pad_token_id": specials["pad"]}  # fmt: skip
    files |= {
        "model.safetensors": save(state, metadata={"format": "pt"}),
        "config.json": json.dumps(hf_config(cfg, specials, dtype), indent=2).encode(),
        "generation_config.json": json.dumps(generation, indent=2).encode(),
        "pretrain_export.json": json.dumps(summary, indent=2, default=str).encode(),
    }
    # a re-export replaces the whole folder: never old and new files side by side
    storage.replace_dir(files, output_dir_uri, {"key": meta.get("key")})
    return {**summary, "output_dir": output_dir_uri, "files": sorted(files)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretrain.hf_export")
    parser.add_argument("checkpoint", help="a committed step-<N> checkpoint directory")
    parser.add_argument("tokenizer", help="the run's tokenizer directory or tokenizer.json")
    parser.add_argument("out", help="output directory URI (local or s3://)")
    parser.add_argument("--dtype", default="float32", choices=DTYPES)
    args = parser.parse_args(argv)
    summary = export_hf_llama(args.checkpoint, args.tokenizer, args.out, dtype=args.dtype)
    print(json.dumps({k: summary[k] for k in ("key", "step", "num_params", "files")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
