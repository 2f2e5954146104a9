"""Model configuration and the numbers derived from it (parameter count, FLOPs per token).

Torch-free on purpose: the Dagster layer and the scaling planner import this module to size a
run without loading torch.

    from pretrain.model.config import ModelConfig, num_params, flops_per_token
    cfg = ModelConfig(vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32)
    num_params(cfg)              # 6_738_415_616 (Llama-2-7B)
    flops_per_token(cfg, 4096)   # training FLOPs per token: 6N + attention term
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pretrain.errors import ConfigError
from pretrain.settings import check_types


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A Llama-style decoder: RMSNorm pre-norm, RoPE, grouped-query attention, SwiGLU.

    ``n_kv_heads`` < ``n_heads`` gives grouped-query attention (each KV head serves
    ``n_heads // n_kv_heads`` query heads). The SwiGLU hidden size is 8/3 · d_model rounded
    up to a multiple of ``ffn_multiple_of`` (see :func:`ffn_hidden_dim`); ``init_std`` is the
    std of every weight matrix (residual output projections get it scaled by 1/sqrt(2·layers)).
    ``qk_norm`` adds an RMSNorm over each head's queries and keys after the projections and
    before RoPE (OLMo-2, Gemma-3): it bounds the attention logits and removes a common source of
    loss spikes at scale. The z-loss is a term of the objective, not of the architecture: see
    ``optim.z_loss_weight`` in ``pretrain/train/config.py``.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    max_seq_len: int = 2048
    ffn_multiple_of: int = 256
    ffn_dim_multiplier: float = 1.0
    tie_embeddings: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02
    qk_norm: bool = False

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "max_seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"ModelConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"ModelConfig.d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"pick n_heads dividing d_model (e.g. {self.d_model // 64} for head_dim 64)"
            )
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"ModelConfig.n_heads={self.n_heads} is not divisible by n_kv_heads="
                f"{self.n_kv_heads}; use n_kv_heads = n_heads (MHA) or a divisor of it (GQA)"
            )
        if self.head_dim % 2:
            raise ConfigError(
                f"head_dim = d_model / n_heads = {self.head_dim} must be even for RoPE; "
                "change d_model or n_heads"
            )
        if self.ffn_multiple_of <= 0:
            raise ConfigError("ModelConfig.ffn_multiple_of must be positive (e.g. 256)")
        if min(self.rope_theta, self.norm_eps, self.init_std, self.ffn_dim_multiplier) <= 0:
            raise ConfigError(
                "ModelConfig.rope_theta, norm_eps, init_std and ffn_dim_multiplier must be positive"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        return ffn_hidden_dim(self.d_model, self.ffn_multiple_of, self.ffn_dim_multiplier)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(
                f"unknown ModelConfig fields {sorted(unknown)}; known: {sorted(known)}"
            )
        return cls(**data)


def ffn_hidden_dim(d_model: int, multiple_of: int, multiplier: float = 1.0) -> int:
    """SwiGLU hidden size: 2/3 of 4·d (same FLOPs as a 4·d GELU MLP), times ``multiplier``
    (Llama-2-70B uses 1.3), rounded up to a multiple of ``multiple_of``."""
    hidden = int(2 * (4 * d_model) / 3)
    hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def num_params(cfg: ModelConfig) -> int:
    """Exact number of trainable parameters of :class:`pretrain.model.Transformer`."""
    d, kv_dim = cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    attention = d * d + 2 * d * kv_dim + d * d  # wq, wk, wv, wo
    feed_forward = 3 * d * cfg.ffn_hidden  # w1, w3 (gate, up), w2 (down)
    norms = 2 * d + (2 * cfg.head_dim if cfg.qk_norm else 0)  # qk_norm: one gain per q, k
    per_layer = attention + feed_forward + norms
    embedding = cfg.vocab_size * d
    output = 0 if cfg.tie_embeddings else cfg.vocab_size * d
    return embedding + cfg.n_layers * per_layer + d + output


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs (forward + backward) per token at context length ``seq_len``.

    ``6 · N_matmul + 12 · n_layers · d_model · seq_len`` (PaLM appendix B / nanoGPT): every
    weight that takes part in a matmul costs 6 FLOPs per token; the input embedding is a
    lookup, so it is left out unless tied to the output head. The attention term counts QKᵀ and
    attention·V over the full context (no causal halving, the usual MFU convention).
    """
    if seq_len <= 0:
        raise ConfigError(f"seq_len must be positive, got {seq_len}")
    lookup = 0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model
    matmul_params = num_params(cfg) - lookup
    return float(6 * matmul_params + 12 * cfg.n_layers * cfg.d_model * seq_len)
