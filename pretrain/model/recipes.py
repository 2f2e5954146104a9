"""Named model recipes: one table of shapes, each row callable as a :class:`ModelConfig` builder.

    from pretrain.model.recipes import debug_tiny, get_recipe
    cfg = debug_tiny(vocab_size=512)     # ~1M params, trains on 2 CPU cores in seconds
    cfg = get_recipe("llama_1b")(vocab_size=32000)

Shapes follow the Llama family (d_model / layers / heads / KV heads): debug_tiny 128/4/4/2,
llama_125m 768/12/12/12, llama_1b 2048/24/16/16, llama_7b 4096/32/32/32, llama_70b 8192/80/64/8
(FFN multiplier 1.3 → 28672). The ``proxy_*`` rows are the small models of the data-value
engine's proxy recipes (``pretrain.experiments.config``), which name their model here; the
training recipes (``pretrain.train.recipes``) do the same. A new model is a new row.
"""

from __future__ import annotations

from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.model.config import ModelConfig

DEFAULT_VOCAB = 32000


@dataclass(frozen=True)
class ModelRecipe:
    """One row: the shape; call it with the data's vocabulary and context for a ModelConfig.
    ``scaling=False`` keeps a row out of the scaling plan's nearest-recipe choice (models for
    tests and proxies, not for a campaign)."""

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    max_seq_len: int = 2048  # the default context when the caller gives none
    vocab_size: int = DEFAULT_VOCAB  # the default vocabulary when the caller gives none
    ffn_multiple_of: int = 256
    ffn_dim_multiplier: float = 1.0
    tie_embeddings: bool = False
    scaling: bool = True

    def __call__(
        self, vocab_size: int | None = None, max_seq_len: int | None = None
    ) -> ModelConfig:
        return ModelConfig(
            vocab_size=self.vocab_size if vocab_size is None else vocab_size,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            max_seq_len=self.max_seq_len if max_seq_len is None else max_seq_len,
            ffn_multiple_of=self.ffn_multiple_of,
            ffn_dim_multiplier=self.ffn_dim_multiplier,
            tie_embeddings=self.tie_embeddings,
        )


def _small(
    name: str,
    d_model: int,
    n_layers: int,
    n_heads: int,
    n_kv_heads: int,
    max_seq_len: int = 2048,
    vocab_size: int = DEFAULT_VOCAB,
) -> ModelRecipe:
    """A model for tests, demos and proxies: tied embeddings, a fine FFN rounding, never a
    scaling plan's choice."""
    return ModelRecipe(name, d_model, n_layers, n_heads, n_kv_heads, max_seq_len, vocab_size,
                       ffn_multiple_of=32, tie_embeddings=True, scaling=False)  # fmt: skip


RECIPES: dict[str, ModelRecipe] = {
    r.name: r
    for r in (
        # CPU-friendly, for tests and demos (GQA: 2 KV heads)
        _small("debug_tiny", 128, 4, 4, 2, max_seq_len=512, vocab_size=512),
        ModelRecipe("llama_125m", 768, 12, 12, 12, tie_embeddings=True),
        ModelRecipe("llama_1b", 2048, 24, 16, 16),
        ModelRecipe("llama_7b", 4096, 32, 32, 32, max_seq_len=4096),
        ModelRecipe("llama_70b", 8192, 80, 64, 8, max_seq_len=4096, ffn_multiple_of=4096,
                    ffn_dim_multiplier=1.3),
        # the proxies' models (RegMix's ~1M scale on CPU; DataDecide's 20M and 150M on GPU)
        _small("proxy_64x2", 64, 2, 2, 2),
        _small("proxy_64x2_4h", 64, 2, 4, 4),
        _small("proxy_128x2", 128, 2, 4, 4),
        _small("proxy_128x4", 128, 4, 4, 4),
        _small("proxy_20m", 384, 8, 6, 6),
        _small("proxy_150m", 1024, 10, 16, 16),
    )
}  # fmt: skip

debug_tiny = RECIPES["debug_tiny"]
llama_125m = RECIPES["llama_125m"]
llama_1b = RECIPES["llama_1b"]
llama_7b = RECIPES["llama_7b"]
llama_70b = RECIPES["llama_70b"]


def get_recipe(name: str) -> ModelRecipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown model recipe {name!r}; choose one of {sorted(RECIPES)}"
        ) from None
