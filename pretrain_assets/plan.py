"""``scaling_plan``: the campaign's compute plan, Chinchilla-optimal and overtrained (N, D,
FLOPs, GPU-hours, cost, recipe) for a budget or a target model size (library:
:mod:`pretrain.scaling`; settings ``--plan.*``, ``pretrain plan``)."""

import dataclasses

from foundation.assets import ERROR, Made, StageRun, stage_asset
from foundation.metadata import config_hash, finish_output, to_metadata
from pretrain import storage
from pretrain.checks import CheckOutcome
from pretrain.scaling import plan_for_model, plan_from_budget


@stage_asset(
    "scaling_plan",
    stage="plan",
    code_version="scaling-v2",
    group="planning",
    checks={"plan_spends_the_budget": ERROR},
)
def scaling_plan(run: StageRun) -> Made:
    """Chinchilla-optimal and overtrained plans for the budget (or a target model size)."""
    out, config = run.uri("scaling_plan"), run.library()
    ident = run.begin(out, config, inputs=[])
    budget = config.budget
    plan = plan_from_budget(budget)
    values = plan.as_metadata()
    if config.target_params:
        target = plan_for_model(num_params=config.target_params, gpu=budget.gpu, mfu=budget.mfu,
                                dollars_per_gpu_hour=budget.dollars_per_gpu_hour)  # fmt: skip
        values.update(
            {f"target_{k}": v for k, v in dataclasses.asdict(target).items() if k != "name"}
        )
    storage.write_json(values, storage.join(out, "plan.json"))
    spent = abs(plan.chinchilla.flops / budget.flops - 1) < 1e-6
    described = f"plan FLOPs {plan.chinchilla.flops:.3g} vs budget {budget.flops:.3g}"
    return Made(
        data_version=finish_output(out, ident),
        metadata={**to_metadata(values), "config_hash": config_hash(config), "identity": ident.version},
        checks={"plan_spends_the_budget": CheckOutcome(spent, described, {})},
    )  # fmt: skip
