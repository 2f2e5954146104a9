"""Compute planning: from a budget (or a model size) to N parameters, D tokens, FLOPs and cost.

Training compute is C = 6·N·D. Chinchilla-optimal training uses D ≈ 20·N, so for a compute
budget C: N = sqrt(C / 120), D = 20·N. An inference-optimal plan trains a smaller model on
more tokens (``overtrain_tokens_per_param``, e.g. 100–200 as in recent open models) for the
same compute. GPU-hours = C / (peak FLOP/s · MFU) / 3600.

    from pretrain.scaling import ComputeBudget, plan_from_budget, plan_for_model
    plan = plan_from_budget(ComputeBudget(gpu="h100", num_gpus=256, days=14,
                                          dollars_per_gpu_hour=2.5, mfu=0.4))
    plan.as_metadata()["chinchilla_params"]

    plan_for_model(num_params=6.74e9, tokens=2e12, gpu="a100", mfu=0.4).gpu_hours  # ≈ 180K

Checked against published figures in tests: 7B on 1.4T tokens ≈ 5.9e22 FLOPs; LLaMA-2 7B
on 2T tokens ≈ 180K A100-hours at about 40% MFU.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from pretrain.errors import ConfigError
from pretrain.hardware import peak_flops
from pretrain.settings import check_types

CHINCHILLA_TOKENS_PER_PARAM = 20.0
RECIPE_VOCAB = 32000


@dataclass(frozen=True, kw_only=True)
class ComputeBudget:
    gpu: str = "h100"
    num_gpus: int = 64
    days: float = 14.0
    dollars_per_gpu_hour: float = 2.5
    mfu: float = 0.40
    overtrain_tokens_per_param: float = 150.0

    def __post_init__(self) -> None:
        check_types(self)
        peak_flops(self.gpu)  # validates the name
        if self.num_gpus < 1 or self.days <= 0:
            raise ConfigError("num_gpus must be >= 1 and days > 0, e.g. num_gpus=64, days=14")
        if not 0 < self.mfu <= 1:
            raise ConfigError(f"mfu={self.mfu} must be a fraction in (0, 1], e.g. 0.4")
        if self.overtrain_tokens_per_param <= CHINCHILLA_TOKENS_PER_PARAM:
            raise ConfigError("overtrain_tokens_per_param must exceed 20 (Chinchilla), e.g. 150")

    @property
    def gpu_hours(self) -> float:
        return self.num_gpus * self.days * 24

    @property
    def flops(self) -> float:
        return self.gpu_hours * 3600 * peak_flops(self.gpu) * self.mfu


@dataclass(frozen=True, kw_only=True)
class TrainingPlan:
    """One (N, D) choice with its compute, time and cost on the budget's hardware."""

    name: str
    num_params: float
    tokens: float
    flops: float
    gpu_hours: float
    cost_dollars: float
    recipe: str
    recipe_params: int

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.num_params


@dataclass(frozen=True, kw_only=True)
class ScalingPlan:
    budget: ComputeBudget
    chinchilla: TrainingPlan
    overtrained: TrainingPlan

    def as_metadata(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = {
            "budget_flops": self.budget.flops,
            "budget_gpu_hours": self.budget.gpu_hours,
            "budget_cost_dollars": self.budget.gpu_hours * self.budget.dollars_per_gpu_hour,
        }
        for plan in (self.chinchilla, self.overtrained):
            for key, value in asdict(plan).items():
                if key != "name":
                    out[f"{plan.name}_{key}"] = value
        out["table_md"] = self.markdown()
        return out

    def markdown(self) -> str:
        rows = [
            "| plan | params | tokens | tokens/param | FLOPs | GPU-hours | cost $ | recipe |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for p in (self.chinchilla, self.overtrained):
            rows.append(
                f"| {p.name} | {p.num_params:.3g} | {p.tokens:.3g} | {p.tokens_per_param:.0f} | "
                f"{p.flops:.3g} | {p.gpu_hours:,.0f} | {p.cost_dollars:,.0f} | {p.recipe} |"
            )
        return "\n".join(rows)


def training_flops(num_params: float, tokens: float) -> float:
    return 6.0 * num_params * tokens


def gpu_hours_for(flops: float, gpu: str, mfu: float) -> float:
    return flops / (peak_flops(gpu) * mfu) / 3600.0


def nearest_recipe(num_params: float) -> tuple[str, int]:
    """The named recipe whose computed parameter count is closest (in log space)."""
    from pretrain.model.config import num_params as count
    from pretrain.model.recipes import RECIPES

    sizes = {name: count(fn(RECIPE_VOCAB)) for name, fn in RECIPES.items() if fn.scaling}
    name = min(sizes, key=lambda n: abs(math.log(sizes[n] / num_params)))
    return name, sizes[name]


def _plan(name: str, n: float, d: float, gpu: str, mfu: float, price: float) -> TrainingPlan:
    flops = training_flops(n, d)
    hours = gpu_hours_for(flops, gpu, mfu)
    recipe, recipe_params = nearest_recipe(n)
    return TrainingPlan(
        name=name,
        num_params=n,
        tokens=d,
        flops=flops,
        gpu_hours=hours,
        cost_dollars=hours * price,
        recipe=recipe,
        recipe_params=recipe_params,
    )


@dataclass(frozen=True, kw_only=True)
class PlanConfig:
    """The ``scaling_plan`` stage: the ``budget`` to spend and, optionally, ``target_params``
    (plan for this model size instead, tokens by Chinchilla)."""

    budget: ComputeBudget = field(default_factory=ComputeBudget)
    target_params: float | None = None

    def __post_init__(self) -> None:
        check_types(self)
        if self.target_params is not None and self.target_params <= 0:
            raise ConfigError(f"target_params={self.target_params} must be > 0 (e.g. 6.7e9)")


def plan_from_budget(budget: ComputeBudget) -> ScalingPlan:
    """Chinchilla-optimal and inference-optimal (overtrained) plans that spend the budget."""
    c = budget.flops
    n_opt = math.sqrt(c / (6 * CHINCHILLA_TOKENS_PER_PARAM))
    n_small = math.sqrt(c / (6 * budget.overtrain_tokens_per_param))
    args = (budget.gpu, budget.mfu, budget.dollars_per_gpu_hour)
    return ScalingPlan(
        budget=budget,
        chinchilla=_plan("chinchilla", n_opt, CHINCHILLA_TOKENS_PER_PARAM * n_opt, *args),
        overtrained=_plan(
            "overtrained", n_small, budget.overtrain_tokens_per_param * n_small, *args
        ),
    )


def plan_for_model(
    *,
    num_params: float,
    tokens: float | None = None,
    gpu: str = "h100",
    mfu: float = 0.4,
    dollars_per_gpu_hour: float = 2.5,
) -> TrainingPlan:
    """Compute, GPU-hours and cost to train a given model size (Chinchilla tokens by default)."""
    d = tokens if tokens is not None else CHINCHILLA_TOKENS_PER_PARAM * num_params
    return _plan("target", num_params, d, gpu, mfu, dollars_per_gpu_hour)
