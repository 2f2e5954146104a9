"""``scaling_plan``: the campaign's compute plan (N, D, FLOPs, GPU-hours, cost, recipe)."""

import dataclasses

from dagster import AssetCheckResult, AssetCheckSpec, Config, MaterializeResult, asset

from pretrain import storage
from pretrain.scaling import ComputeBudget, plan_for_model, plan_from_budget
from pretrain_assets.metadata import config_hash, to_metadata
from resources.storage import ArtifactStore


class ScalingPlanConfig(Config):
    gpu: str = "h100"
    num_gpus: int = 64
    days: float = 14.0
    dollars_per_gpu_hour: float = 2.5
    mfu: float = 0.40
    overtrain_tokens_per_param: float = 150.0
    target_params: float | None = None  # plan for this size instead (tokens: Chinchilla)


@asset(
    group_name="planning",
    code_version="scaling-v1",
    check_specs=[AssetCheckSpec("plan_spends_the_budget", asset="scaling_plan")],
)
def scaling_plan(config: ScalingPlanConfig, store: ArtifactStore) -> MaterializeResult:
    """Chinchilla-optimal and overtrained plans for the budget (or a target model size)."""
    budget = ComputeBudget(**config.model_dump(exclude={"target_params"}))
    plan = plan_from_budget(budget)
    values = plan.as_metadata()
    if config.target_params:
        target = plan_for_model(
            num_params=config.target_params, gpu=config.gpu, mfu=config.mfu,
            dollars_per_gpu_hour=config.dollars_per_gpu_hour,
        )  # fmt: skip
        values.update(
            {f"target_{k}": v for k, v in dataclasses.asdict(target).items() if k != "name"}
        )
    storage.write_json(values, store.uri("scaling_plan", "plan.json"))
    spent = abs(plan.chinchilla.flops / budget.flops - 1) < 1e-6
    return MaterializeResult(
        metadata={**to_metadata(values), "config_hash": config_hash(config.model_dump())},
        check_results=[
            AssetCheckResult(
                check_name="plan_spends_the_budget",
                passed=spent,
                description=f"plan FLOPs {plan.chinchilla.flops:.3g} vs budget {budget.flops:.3g}",
            )
        ],
    )
