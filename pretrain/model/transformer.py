"""The Llama-style decoder: architecture and deterministic initialization only.

Parallelism (FSDP2 wrapping, mixed precision) lives in ``pretrain/train/parallel.py``; this
file knows nothing about processes.

    from pretrain.model import Transformer, init_weights
    from pretrain.model.recipes import debug_tiny
    model = Transformer(debug_tiny(vocab_size=512))
    init_weights(model, seed=0)
    logits = model(tokens)            # tokens: (batch, seq) int64 -> (batch, seq, vocab)

Blocks are pre-norm: ``x + attn(rmsnorm(x))`` then ``x + swiglu(rmsnorm(x))``; with
``cfg.qk_norm`` queries and keys are RMS-normalized per head before RoPE. Attention
uses ``F.scaled_dot_product_attention(is_causal=True)`` (grouped-query via ``enable_gqa``),
or ``flash_attn_func`` when flash-attn is importable and the tensors are bf16/fp16 on CUDA.
"""

from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from pretrain.model.config import ModelConfig

try:  # optional: GPU machines install the `gpu` extra
    from flash_attn import flash_attn_func
except ImportError:  # pragma: no cover - depends on the machine
    flash_attn_func = None


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalize in fp32 so bf16 activations do not lose the small-variance directions
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_tables(cfg: ModelConfig, device: torch.device | str = "cpu") -> tuple[torch.Tensor, ...]:
    """cos/sin tables of shape (max_seq_len, head_dim // 2) for rotary embeddings."""
    half = cfg.head_dim // 2
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
    angles = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float().to(device), angles.sin().float().to(device)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (batch, seq, heads, head_dim) by position; halves-split layout."""
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    rotated = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rotated.type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)
        # one gain vector of size head_dim, shared by all heads (OLMo-2 / Gemma-3 style)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = self.wq(x).view(batch, seq, self.n_heads, self.head_dim)
        k = self.wk(x).view(batch, seq, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(batch, seq, self.n_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if flash_attn_func is not None and q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
            out = flash_attn_func(q, k, v, causal=True)  # (batch, seq, heads, head_dim), GQA-aware
        else:
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2),
                k.transpose(1, 2),
                v.transpose(1, 2),
                is_causal=True,
                enable_gqa=self.n_kv_heads != self.n_heads,
            ).transpose(1, 2)
        return self.wo(out.reshape(batch, seq, self.n_heads * self.head_dim))


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1 x) * w3 x)``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.w3 = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.w2 = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    rope_cos: torch.Tensor  # buffers registered in __init__
    rope_sin: torch.Tensor

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.tie_weights()
        # not persistent: recomputed by reset_rope() after a meta-device build, never checkpointed
        cos, sin = rope_tables(cfg, device=self.tok_embeddings.weight.device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def tie_weights(self) -> None:
        """Share the output head with the embedding; call again after a plain ``to_empty()``,
        which gives each module its own copy (FSDP2's ``to_empty`` keeps the sharing)."""
        if self.cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight

    def reset_rope(self) -> None:
        cos, sin = rope_tables(self.cfg, device=self.rope_cos.device)
        with torch.no_grad():
            self.rope_cos.copy_(cos)
            self.rope_sin.copy_(sin)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        if seq > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {seq} exceeds max_seq_len={self.cfg.max_seq_len}")
        cos, sin = self.rope_cos[:seq], self.rope_sin[:seq]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def init_std(cfg: ModelConfig, name: str) -> float | None:
    """Init std for parameter ``name``; None means "ones" (norm gains).

    Output projections of each residual branch (``wo``, ``w2``) are scaled by
    1/sqrt(2·n_layers) (GPT-2) so the residual stream's variance does not grow with depth.
    """
    if name.endswith("norm.weight"):  # block norms, final norm, q_norm, k_norm
        return None
    if name.endswith(("attention.wo.weight", "feed_forward.w2.weight")):
        return cfg.init_std / math.sqrt(2 * cfg.n_layers)
    return cfg.init_std


def initial_value(cfg: ModelConfig, name: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """The full (unsharded) initial value of one parameter, on CPU.

    Each parameter draws from its own generator seeded by (seed, name), so the result does not
    depend on parameter order, world size or sharding.
    """
    std = init_std(cfg, name)
    if std is None:
        return torch.ones(shape)
    generator = torch.Generator().manual_seed(
        (seed * 1_000_003 + zlib.crc32(name.encode())) % 2**62
    )
    return torch.empty(shape).normal_(0.0, std, generator=generator)


@torch.no_grad()
def init_weights(model: Transformer, seed: int) -> None:
    """Deterministically initialize every parameter (plain or FSDP2-sharded) and the RoPE tables."""
    for name, param in model.named_parameters():
        full = initial_value(model.cfg, name, tuple(param.shape), seed)
        if isinstance(param, DTensor):
            # every rank holds the same full value, so no communication is needed (src_data_rank=None)
            shard = distribute_tensor(
                full.to(param.device), param.device_mesh, param.placements, src_data_rank=None
            )
            param.to_local().copy_(shard.to_local())
        else:
            param.copy_(full.to(device=param.device, dtype=param.dtype))
    model.reset_rope()
