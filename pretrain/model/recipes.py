"""Named model recipes: plain functions returning a :class:`ModelConfig`.

    from pretrain.model.recipes import debug_tiny, llama_7b, get_recipe
    cfg = debug_tiny(vocab_size=512)     # ~1M params, trains on 2 CPU cores in seconds
    cfg = get_recipe("llama_1b")(vocab_size=32000)

Shapes follow the Llama family (d_model / layers / heads):
debug_tiny 128/4/4 (2 KV heads), llama_125m 768/12/12, llama_1b 2048/24/16,
llama_7b 4096/32/32, llama_70b 8192/80/64 (8 KV heads, FFN multiplier 1.3 -> 28672).
"""

from __future__ import annotations

from collections.abc import Callable

from pretrain.errors import ConfigError
from pretrain.model.config import ModelConfig

DEFAULT_VOCAB = 32000


def debug_tiny(vocab_size: int = 512, max_seq_len: int = 512) -> ModelConfig:
    """A CPU-friendly model for tests and demos: d=128, 4 layers, 4 heads, 2 KV heads (GQA)."""
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=128,
        n_layers=4,
        n_heads=4,
        n_kv_heads=2,
        max_seq_len=max_seq_len,
        ffn_multiple_of=32,
        tie_embeddings=True,
    )


def llama_125m(vocab_size: int = DEFAULT_VOCAB, max_seq_len: int = 2048) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=768,
        n_layers=12,
        n_heads=12,
        n_kv_heads=12,
        max_seq_len=max_seq_len,
        tie_embeddings=True,
    )


def llama_1b(vocab_size: int = DEFAULT_VOCAB, max_seq_len: int = 2048) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=2048,
        n_layers=24,
        n_heads=16,
        n_kv_heads=16,
        max_seq_len=max_seq_len,
    )


def llama_7b(vocab_size: int = DEFAULT_VOCAB, max_seq_len: int = 4096) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        max_seq_len=max_seq_len,
    )


def llama_70b(vocab_size: int = DEFAULT_VOCAB, max_seq_len: int = 4096) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        max_seq_len=max_seq_len,
        ffn_multiple_of=4096,
        ffn_dim_multiplier=1.3,
    )


RECIPES: dict[str, Callable[..., ModelConfig]] = {
    "debug_tiny": debug_tiny,
    "llama_125m": llama_125m,
    "llama_1b": llama_1b,
    "llama_7b": llama_7b,
    "llama_70b": llama_70b,
}


def get_recipe(name: str) -> Callable[..., ModelConfig]:
    try:
        return RECIPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown model recipe {name!r}; choose one of {sorted(RECIPES)}"
        ) from None
