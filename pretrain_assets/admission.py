"""``data_admission[shard]``: admit, hold for review or reject a new shard group (library:
:mod:`pretrain.experiments.admission`; settings ``--admission.*``): the proxies with and without
it over seeds, its floor (its words shuffled) and a reference of clean data of its kind, its
relative value between them, its noise risk and its cleaning cost, decided by the policy or an
operator's review (given at launch, kept with who and why). ``experiment_sensor`` asks for it
once the arms have run; ``data_mixture`` leaves rejected (and held) groups out."""

import datetime
from typing import Any

from dagster import AllPartitionMapping, AssetDep, MetadataValue

from foundation.assets import Made, StageRun, stage_asset
from foundation.experiments import cleaning_cpu_seconds, experiment_root
from foundation.metadata import finish_output, to_metadata
from foundation.partitions import shard_partitions
from pretrain import storage
from pretrain.experiments.decisions import DECISION_FILE, record_review
from pretrain.experiments.evidence import admission_inputs, decide, experiment_charts


@stage_asset(
    "data_admission",
    stage="admission",
    partitions=shard_partitions,
    batched=False,  # one decision a run, as the sensor asks for it
    deps=["proxy_pools", AssetDep("proxy_runs", partition_mapping=AllPartitionMapping())],
    code_version="admission-v1",
    group="experiments",
)
def data_admission(run: StageRun) -> Made:
    """Admit, hold for review or reject one shard group: proxies with and without it over
    seeds, its noise risk and its cleaning cost, decided by the policy (or an operator)."""
    group, config, instance = run.partition or "", run.library(), run.context.instance
    if config.review is not None:  # the operator's decision, kept with who and why
        at = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        record_review(run.uri("admission_reviews"), group, config.review,
                      run_id=run.context.run.run_id, at=at)  # fmt: skip
    found = admission_inputs(experiment_root(instance, run.store), group, config,
                             cpu_seconds=cleaning_cpu_seconds(instance, group),
                             warn=run.context.log.warning)  # fmt: skip
    decision = decide(found, config)
    for warning in decision.warnings:
        run.context.log.warning(f"{group}: {warning}")
    record = {**decision.to_dict(), "policy_decision": decision.decision, "decided_by": "policy"}
    if found.review is not None:
        record.update(decision=found.review["decision"], decided_by=found.review["reviewer"])
        record["review"] = found.review
    out = run.uri("data_admission", group)
    ident = run.begin(out, {"config": config, "decision": record["decision"],
                            "review": found.review}, found.inputs)  # fmt: skip
    storage.write_json(record, storage.join(out, DECISION_FILE))
    return Made(data_version=finish_output(out, ident), metadata={
        **to_metadata({**_summary(record, decision), "identity": ident.version}),
        "loss_curves_md": MetadataValue.md(experiment_charts(found, decision)),
    })  # fmt: skip


def _summary(record: dict[str, Any], decision: Any) -> dict[str, Any]:
    """What the asset page shows of a decision: the verdict, why, the relative value between
    the floor and the reference, the evidence and what it cost."""
    evidence, value = decision.evidence, decision.relative
    return {
        "decision": record["decision"],
        "decided_by": record["decided_by"],
        "policy_decision": decision.decision,
        "cannot_see": decision.cannot_see,
        "next_recipe": decision.next_recipe,
        "reason": decision.reason,
        "yardstick": decision.yardstick,
        "relative_value": value.value if value else None,
        "relative_value_spread": value.spread if value else None,
        "floor_change": value.floor_change if value else None,
        "reference_change": value.reference_change if value else None,
        "warnings": list(decision.warnings),
        "delta_bits_per_byte": evidence.delta_bpb,
        "spread_bits_per_byte": evidence.spread_bpb,
        "seeds": list(evidence.seeds),
        "noise": record.get("noise"),
        "corpus_noise": record.get("corpus_noise"),
        "cost": record.get("cost"),
        "proxy_flops": evidence.proxy_flops,
        "proxy_seconds": evidence.proxy_seconds,
        "experiments": evidence.experiments,
    }
