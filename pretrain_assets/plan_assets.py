"""``scaling_plan``: the campaign's compute plan (N, D, FLOPs, GPU-hours, cost, recipe)."""

import dataclasses
from typing import TYPE_CHECKING, Any

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    MaterializeResult,
    asset,
)

from jobs.config import to_library
from jobs.stages import STAGES
from pretrain import storage
from pretrain.scaling import PlanConfig, plan_for_model, plan_from_budget
from pretrain_assets.metadata import begin_output, config_hash, finish_output, to_metadata
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    ScalingPlanConfig = Any
else:
    ScalingPlanConfig = STAGES["plan"].config_class


@asset(
    group_name="planning",
    code_version="scaling-v2",
    check_specs=[AssetCheckSpec("plan_spends_the_budget", asset="scaling_plan")],
)
def scaling_plan(
    context: AssetExecutionContext, config: ScalingPlanConfig, store: ArtifactStore
) -> MaterializeResult:
    """Chinchilla-optimal and overtrained plans for the budget (or a target model size)."""
    library_config = to_library(config, PlanConfig)
    out = store.uri("scaling_plan")
    ident = begin_output(context, store, out, library_config, inputs=[])
    budget = library_config.budget
    plan = plan_from_budget(budget)
    values = plan.as_metadata()
    if library_config.target_params:
        target = plan_for_model(
            num_params=library_config.target_params, gpu=budget.gpu, mfu=budget.mfu,
            dollars_per_gpu_hour=budget.dollars_per_gpu_hour,
        )  # fmt: skip
        values.update(
            {f"target_{k}": v for k, v in dataclasses.asdict(target).items() if k != "name"}
        )
    storage.write_json(values, storage.join(out, "plan.json"))
    spent = abs(plan.chinchilla.flops / budget.flops - 1) < 1e-6
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata={
            **to_metadata(values),
            "config_hash": config_hash(library_config),
            "identity": ident.version,
        },
        check_results=[
            AssetCheckResult(
                check_name="plan_spends_the_budget",
                passed=spent,
                description=f"plan FLOPs {plan.chinchilla.flops:.3g} vs budget {budget.flops:.3g}",
            )
        ],
    )
