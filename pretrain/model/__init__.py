"""The Llama-style decoder and its named recipes.

``ModelConfig``, ``num_params``, ``flops_per_token`` and the recipes are torch-free and imported
eagerly; ``Transformer`` and ``init_weights`` load torch on first access, so sizing a run from
the Dagster layer never imports torch.

    from pretrain.model import ModelConfig, num_params, flops_per_token, Transformer, init_weights
    from pretrain.model.recipes import debug_tiny, llama_125m, llama_1b, llama_7b, llama_70b
"""

from __future__ import annotations

from typing import Any

from pretrain.model.config import ModelConfig, ffn_hidden_dim, flops_per_token, num_params
from pretrain.model.recipes import RECIPES, get_recipe

__all__ = [
    "RECIPES",
    "ModelConfig",
    "Transformer",
    "ffn_hidden_dim",
    "flops_per_token",
    "get_recipe",
    "init_weights",
    "num_params",
]


def __getattr__(name: str) -> Any:
    if name in ("Transformer", "init_weights"):
        from pretrain.model import transformer

        return getattr(transformer, name)
    raise AttributeError(f"module 'pretrain.model' has no attribute {name!r}")
