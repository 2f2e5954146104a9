"""Model unit tests: parameter count and FLOPs formulas, causality, GQA, deterministic init."""

from __future__ import annotations

import math

import pytest
import torch

from pretrain.errors import ConfigError
from pretrain.model import ModelConfig, Transformer, flops_per_token, init_weights, num_params
from pretrain.model.recipes import RECIPES, debug_tiny, llama_7b, llama_70b
from pretrain.model.transformer import initial_value


def _small(**overrides) -> ModelConfig:
    base = dict(
        vocab_size=97,
        d_model=64,
        n_layers=3,
        n_heads=8,
        n_kv_heads=2,
        max_seq_len=32,
        ffn_multiple_of=16,
        tie_embeddings=False,
    )
    return ModelConfig(**{**base, **overrides})


@pytest.mark.parametrize(
    "cfg", [debug_tiny(512), _small(), _small(tie_embeddings=True, n_kv_heads=8)]
)
def test_num_params_matches_the_module(cfg: ModelConfig) -> None:
    model = Transformer(cfg)
    assert sum(p.numel() for p in model.parameters()) == num_params(cfg)


def test_recipes_have_the_published_sizes() -> None:
    # Llama-2-7B has 6,738,415,616 parameters at vocab 32000
    assert num_params(llama_7b(vocab_size=32000)) == 6_738_415_616
    big = llama_70b(vocab_size=32000)
    assert big.ffn_hidden == 28672 and big.n_kv_heads == 8
    assert 68.5e9 < num_params(big) < 69.5e9
    assert 0.5e6 < num_params(debug_tiny(512)) < 5e6
    for name, recipe in RECIPES.items():
        with torch.device("meta"):  # no memory: checks that every recipe builds
            model = Transformer(recipe())
        assert sum(p.numel() for p in model.parameters()) == num_params(recipe()), name


def test_flops_per_token_formula() -> None:
    cfg = _small()
    expected = 6 * (num_params(cfg) - 97 * 64) + 12 * 3 * 64 * 32
    assert flops_per_token(cfg, 32) == expected
    tied = _small(tie_embeddings=True)
    assert flops_per_token(tied, 32) == 6 * num_params(tied) + 12 * 3 * 64 * 32


def test_config_errors_say_how_to_fix() -> None:
    with pytest.raises(ConfigError, match="n_heads"):
        _small(n_heads=7)
    with pytest.raises(ConfigError, match="n_kv_heads"):
        _small(n_kv_heads=3)
    with pytest.raises(ConfigError, match="unknown ModelConfig fields"):
        ModelConfig.from_dict({**_small().to_dict(), "dropout": 0.1})
    assert ModelConfig.from_dict(_small().to_dict()) == _small()


def test_attention_is_causal() -> None:
    torch.manual_seed(0)
    model = Transformer(_small())
    init_weights(model, seed=3)
    tokens = torch.randint(0, 97, (2, 20))
    changed = tokens.clone()
    changed[:, 12] = (changed[:, 12] + 1) % 97
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert torch.equal(before[:, :12], after[:, :12])
    assert not torch.allclose(before[:, 12:], after[:, 12:])


def test_grouped_query_attention_shares_kv_heads() -> None:
    model = Transformer(_small())
    assert model.layers[0].attention.wk.weight.shape == (2 * 8, 64)  # 2 KV heads of dim 8
    assert model.layers[0].attention.wq.weight.shape == (64, 64)


def test_init_is_deterministic_and_scaled() -> None:
    cfg = _small(n_layers=8, d_model=256, n_heads=4, n_kv_heads=4)
    a, b, c = Transformer(cfg), Transformer(cfg), Transformer(cfg)
    init_weights(a, seed=1)
    init_weights(b, seed=1)
    init_weights(c, seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.layers[0].attention.wq.weight, c.layers[0].attention.wq.weight)
    assert torch.equal(a.norm.weight, torch.ones(256))
    assert a.layers[0].attention.wq.weight.std().item() == pytest.approx(0.02, rel=0.05)
    scaled = 0.02 / math.sqrt(2 * 8)
    assert a.layers[0].feed_forward.w2.weight.std().item() == pytest.approx(scaled, rel=0.05)
    # a parameter's value depends only on (seed, name): order and sharding cannot change it
    name = "layers.0.attention.wq.weight"
    assert torch.equal(
        initial_value(cfg, name, (256, 256), seed=1), a.layers[0].attention.wq.weight
    )


def test_meta_build_then_init_matches_eager_build() -> None:
    cfg = debug_tiny(128)
    eager = Transformer(cfg)
    init_weights(eager, seed=5)
    with torch.device("meta"):
        lazy = Transformer(cfg)
    lazy.to_empty(device="cpu")
    lazy.tie_weights()
    init_weights(lazy, seed=5)
    tokens = torch.randint(0, 128, (1, 16))
    assert torch.equal(eager(tokens), lazy(tokens))
    assert lazy.output.weight is lazy.tok_embeddings.weight  # tying survives to_empty
