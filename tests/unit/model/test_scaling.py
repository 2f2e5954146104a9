"""Compute planning against published figures."""

import math

import pytest

from pretrain.errors import ConfigError
from pretrain.model.config import num_params
from pretrain.model.recipes import llama_7b
from pretrain.scaling import ComputeBudget, plan_for_model, plan_from_budget, training_flops


def test_7b_on_1_4t_tokens_is_about_5_9e22_flops() -> None:
    assert training_flops(7e9, 1.4e12) == pytest.approx(5.88e22, rel=0.01)


def test_llama2_7b_on_2t_tokens_is_about_180k_a100_hours() -> None:
    n = num_params(llama_7b(32000))  # computed from the recipe: 6.74e9
    plan = plan_for_model(num_params=n, tokens=2e12, gpu="a100", mfu=0.40)
    assert plan.gpu_hours == pytest.approx(180_000, rel=0.03)
    assert plan.recipe == "llama_7b"


def test_budget_plans_spend_the_budget_with_chinchilla_and_overtrained_shapes() -> None:
    budget = ComputeBudget(gpu="h100", num_gpus=256, days=14, dollars_per_gpu_hour=2.5, mfu=0.4)
    plan = plan_from_budget(budget)
    for p in (plan.chinchilla, plan.overtrained):
        assert p.flops == pytest.approx(budget.flops, rel=1e-9)
        assert p.gpu_hours == pytest.approx(budget.gpu_hours, rel=1e-9)
    assert plan.chinchilla.tokens_per_param == pytest.approx(20)
    assert plan.overtrained.num_params < plan.chinchilla.num_params
    # 256 H100 x 14 days at 40% MFU ~ 3.4e23 FLOPs -> N ~ 53B on ~1.1T tokens
    assert math.isclose(plan.chinchilla.num_params, math.sqrt(budget.flops / 120), rel_tol=1e-12)
    assert plan.chinchilla.recipe == "llama_70b" and "| chinchilla |" in plan.markdown()


def test_invalid_budget_says_how_to_fix() -> None:
    with pytest.raises(ConfigError, match="fraction"):
        ComputeBudget(mfu=40)
    with pytest.raises(ConfigError, match="unknown accelerator"):
        ComputeBudget(gpu="tpu9")
