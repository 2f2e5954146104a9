"""The data-value engine as assets: proxies decide admission and the mixture.

    deduped_shards[shard] ─▶ experiment_basis (proxy tokenizer + shared validation)
    deduped_shards[shard] + experiment_basis ─▶ proxy_pools[shard]
    proxy_pools (+ ablation_pools[arm]) + experiment_basis ─▶ proxy_runs[experiment] ─▶ mixture_search
                                                             └▶ data_admission[shard] ─▶ data_mixture

An experiment is registered (``experiment_specs/<name>.json``) before its partition runs: by
``pretrain experiments`` (add, search, ablate), by the ``search_mixture`` job, or by
``experiment_sensor`` for a new shard group. ``proxy_runs`` trains through ``proxy_launcher``
(the campaign's torchrun launcher, one process) unless ``in_process`` is set; the same spec on
the same inputs has the same identity, so it is not trained twice.
"""

import datetime
from typing import TYPE_CHECKING, Any

from dagster import (
    AllPartitionMapping,
    AssetDep,
    AssetExecutionContext,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    ResourceParam,
    asset,
)

from jobs.config import to_library
from jobs.experiments import cleaning_cpu_seconds, corpus_groups, experiment_root
from jobs.partitions import ablation_partitions, experiment_partitions, shard_partitions
from jobs.stages import STAGES
from pretrain import identity, storage
from pretrain.errors import DataError
from pretrain.eval.evaluate import EvalConfig
from pretrain.experiments import admission, registry
from pretrain.experiments.basis import BasisConfig, build_basis, held_out_ids
from pretrain.experiments.config import ExperimentsConfig, ExperimentSpec
from pretrain.experiments.corpus import ablation_variant, build_ablation_pools
from pretrain.experiments.decisions import DECISION_FILE, record_review
from pretrain.experiments.evidence import (
    admission_inputs,
    decide,
    experiment_charts,
    search_result,
)
from pretrain.experiments.pools import build_floor_pool, build_pool
from pretrain.experiments.run import ExperimentResult, TrainFn, run_experiment, train_in_process
from pretrain.experiments.search import SearchConfig
from pretrain.train.config import TrainConfig
from pretrain_assets.metadata import begin_output, finish_output, stage_metadata, to_metadata
from pretrain_assets.per_shard import ShardOutput, own_group, shard_asset
from resources.launching import Launcher
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    BasisRunConfig = Any
    ProxyRunConfig = Any
    SearchRunConfig = Any
    AdmissionRunConfig = Any
else:
    BasisRunConfig = STAGES["basis"].config_class
    ProxyRunConfig = STAGES["proxy"].config_class
    SearchRunConfig = STAGES["search"].config_class
    AdmissionRunConfig = STAGES["admission"].config_class


def _version(uri: str) -> str:
    """The version of the completed output at ``uri`` (corpus_groups lists only those)."""
    ident = identity.read(uri)
    assert ident is not None, f"{uri} has no identity"
    return ident.version


@asset(
    deps=[AssetDep("deduped_shards", partition_mapping=AllPartitionMapping())],
    group_name="experiments",
    code_version="basis-v2",  # v2: long validation documents are windows
)
def experiment_basis(
    context: AssetExecutionContext, config: BasisRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """The proxies' tokenizer and the validation set every experiment is scored on, from the
    shard groups present now (later groups never enter it)."""
    library_config = to_library(config, BasisConfig)
    groups = corpus_groups(context.instance)
    out = store.uri("experiment_basis")
    # a fixed yardstick: the groups' versions name it, but their later changes (incremental
    # dedup, new groups) never make it stale; it changes only when it is made again
    made_from = {g: _version(store.uri("deduped_shards", g)) for g in groups}
    ident = begin_output(context, store, out, {"config": library_config, "groups": made_from}, [])
    documents = [store.uri("deduped_shards", g, "documents.parquet") for g in groups]
    stats = build_basis(documents, out, library_config, shard_groups=groups)
    storage.write_json(stats.as_metadata(), storage.join(out, "basis.json"))
    for warning in (w for found in stats.warnings.values() for w in found):
        context.log.warning(warning)  # a yardstick too small to judge by
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out),
    )


@shard_asset(
    "proxy_pools",
    deps={"deduped_shards": True, "experiment_basis": False},
    code_version="pools-v1",
    group="experiments",
)
def proxy_pools(
    context: AssetExecutionContext, group: str, store: ArtifactStore, _: None
) -> ShardOutput:
    """One shard group's documents in the proxy tokenizer, validation documents left out."""
    basis = store.uri("experiment_basis")
    out = store.uri("proxy_pools", group)
    made = storage.read_json(storage.join(basis, "basis.json"))
    new = group not in made["shard_groups"]  # a group to decide: its floor is pooled too
    settings = {"seq_len": made["seq_len"], "floor": new}
    inputs = [store.uri("deduped_shards", group), basis]
    ident = begin_output(context, store, out, settings, inputs, partition=group,
                         look=own_group(store, group))  # fmt: skip
    documents = [store.uri("deduped_shards", group, "documents.parquet")]
    tokenizer, held = storage.join(basis, "tokenizer"), held_out_ids(basis)
    pools = build_pool(documents, tokenizer, out, group=group, seq_len=made["seq_len"],
                       exclude_ids=held)  # fmt: skip
    floor = build_floor_pool(documents, tokenizer, out, group=group, seq_len=made["seq_len"],
                             exclude_ids=held) if new else []  # fmt: skip
    return ShardOutput(
        data_version=finish_output(out, ident),
        metadata=to_metadata(
            {
                "sources": {p.source: p.sequences for p in pools},
                "tokens": sum(p.tokens for p in pools),
                "floor_tokens": sum(p.tokens for p in floor),
                "documents": sum(p.documents for p in pools),
                "held_out_documents_left_out": pools[0].excluded_documents,
                "uri": out,
            }
        ),
    )


@asset(
    partitions_def=ablation_partitions,
    deps=[experiment_basis, AssetDep("proxy_pools", partition_mapping=AllPartitionMapping())],
    group_name="experiments",
    code_version="ablation-pools-v1",
)
def ablation_pools(context: AssetExecutionContext, store: ArtifactStore) -> MaterializeResult:
    """A filter ablation's arm: every admitted shard group filtered again with the arm's
    settings and pooled (``pretrain experiments ablate`` registers the arm)."""
    root = experiment_root(context.instance, store)
    variant, out = ablation_variant(root, context.partition_key)
    ident = begin_output(context, store, out, variant.to_dict(), [store.uri("experiment_basis")])
    stats = build_ablation_pools(root, variant)
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=to_metadata({"filter": variant.filter, "groups": stats, "uri": out}),
    )


def _launcher_train(context: AssetExecutionContext, launcher: Launcher) -> TrainFn:
    def train(cfg: TrainConfig, config_path: str) -> None:
        result = launcher.launch(
            context.op_execution_context, config_path=config_path,
            run_dir=str(cfg.branch_dir()), on_message=lambda event: None,
        )  # fmt: skip
        if not result.ok:
            raise Failure(
                description=f"proxy training failed (exit {result.returncode})",
                metadata=result.metadata(),
            )

    return train


PROXY_CODE_VERSION = "proxy-v2"  # v2: a capped source is scored over all its sequences


def start_of(
    store: ArtifactStore, spec: ExperimentSpec
) -> tuple[ExperimentResult | None, list[str]]:
    """An anneal's base result and its folder (none for a proxy trained from scratch); the
    base must have run: ``experiment_sensor`` and ``pretrain experiments admit`` run it first."""
    if not spec.base:
        return None, []
    where = registry.result_dir(store.root, spec.base)
    result = registry.read_result(where)
    if result is None or identity.read(where) is None:
        raise DataError(
            f"experiment {spec.name} continues {spec.base}, which has not run: materialize "
            f"proxy_runs[{spec.base}] first (experiment_sensor runs it before the anneals)"
        )
    return result, [where]


@asset(
    partitions_def=experiment_partitions,
    deps=[
        experiment_basis,
        AssetDep(proxy_pools, partition_mapping=AllPartitionMapping()),
        AssetDep(ablation_pools, partition_mapping=AllPartitionMapping()),
    ],
    group_name="experiments",
    code_version=PROXY_CODE_VERSION,
)
def proxy_runs(
    context: AssetExecutionContext,
    config: ProxyRunConfig,
    store: ArtifactStore,
    proxy_launcher: ResourceParam[Launcher],
) -> MaterializeResult:
    """One proxy experiment: its data view, a small model trained on it, its validation bits
    per byte per source, its task likelihood and its cost."""
    name = context.partition_key
    library_config = to_library(config, ExperimentsConfig)
    spec = registry.load_spec(store.root, name)
    basis = store.uri("experiment_basis")
    root = experiment_root(context.instance, store)
    pools, pool_dirs = root.variant_pools(spec.variant)
    out = registry.result_dir(store.root, name)
    base, base_dirs = start_of(store, spec)
    tasks = EvalConfig(task_dir=library_config.task_dir).task_specs()
    settings = {
        "spec": spec.settings(),
        "max_epochs": library_config.max_epochs,
        # the task files it is scored on: a new task set is not scored with stale results
        "tasks": {
            t.name or t.kind: identity.file_identity(t.path) if storage.exists(t.path) else None
            for t in tasks
        },
    }
    inputs = [basis, *pool_dirs, *base_dirs]  # an anneal's base: its identity is chained in
    ident = identity.compute("proxy_runs", PROXY_CODE_VERSION, settings, inputs)
    existing = identity.read(out)
    cached = existing is not None and existing.version == ident.version
    if not cached:  # the same spec on the same inputs is never trained twice
        ident = begin_output(context, store, out, settings, inputs)
        run_experiment(
            spec, pools, val_packed_dir=storage.join(basis, "validation"),
            tokenizer_uri=storage.join(basis, "tokenizer"), out_dir=out, tasks=tasks,
            max_epochs=library_config.max_epochs, targets_packed_dir=root.targets_dir(),
            train_fn=train_in_process if library_config.in_process
            else _launcher_train(context, proxy_launcher),
            base=base,
        )  # fmt: skip
        finish_output(out, ident)
    result = registry.read_result(out)
    if result is None:
        raise DataError(f"{out}: the proxy run left no result.json")
    return MaterializeResult(
        data_version=DataVersion(ident.version),
        metadata=to_metadata(
            {
                "kind": spec.kind,
                "group": spec.group,
                "label": spec.label,
                "recipe": spec.recipe,
                "seed": spec.seed,
                "cached": cached,
                "identity": ident.version,
                "mean_bits_per_byte": result.mean_bits_per_byte,
                "bits_per_byte": result.bits_per_byte,
                "targets_bits_per_byte": result.targets,
                "shares": result.shares,
                "tasks": result.tasks,
                "cost": result.cost,
                "uri": out,
            }
        ),
    )


@asset(
    deps=[AssetDep(proxy_runs, partition_mapping=AllPartitionMapping())],
    group_name="experiments",
    code_version="search-v2",
)
def mixture_search(
    context: AssetExecutionContext, config: SearchRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """RegMix: a regression from mixture weights to the chosen target over the search's
    candidate proxies, its held-out rank correlation, and the weights it proposes."""
    library_config = to_library(config, SearchConfig)
    out = store.uri("mixture_search")
    found = search_result(experiment_root(context.instance, store), library_config)
    ident = begin_output(context, store, out, found.settings, found.inputs)
    storage.write_json(found.report, storage.join(out, "search.json"))
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata={
            **to_metadata(found.summary),
            "identity": ident.version,
            "fit_md": MetadataValue.md(found.chart_md),
        },
    )


@asset(
    partitions_def=shard_partitions,
    deps=[proxy_pools, AssetDep(proxy_runs, partition_mapping=AllPartitionMapping())],
    group_name="experiments",
    code_version="admission-v1",
)
def data_admission(
    context: AssetExecutionContext, config: AdmissionRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Admit, hold for review or reject one shard group: proxies with and without it over
    seeds, its noise risk and its cleaning cost, decided by the policy (or an operator)."""
    group = context.partition_key
    library_config = to_library(config, admission.AdmissionConfig)
    if library_config.review is not None:  # the operator's decision, kept with who and why
        at = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        record_review(
            store.uri("admission_reviews"), group, library_config.review,
            run_id=context.run.run_id, at=at,
        )  # fmt: skip
    found = admission_inputs(
        experiment_root(context.instance, store), group, library_config,
        cpu_seconds=cleaning_cpu_seconds(context.instance, group), warn=context.log.warning,
    )  # fmt: skip
    decision = decide(found, library_config)
    for warning in decision.warnings:
        context.log.warning(f"{group}: {warning}")
    record = {**decision.to_dict(), "policy_decision": decision.decision, "decided_by": "policy"}
    if found.review is not None:
        record.update(decision=found.review["decision"], decided_by=found.review["reviewer"])
        record["review"] = found.review
    out = store.uri("data_admission", group)
    settings = {"config": library_config, "decision": record["decision"], "review": found.review}
    ident = begin_output(context, store, out, settings, found.inputs)
    storage.write_json(record, storage.join(out, DECISION_FILE))
    evidence, value = decision.evidence, decision.relative
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata={
            **to_metadata(
                {
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
                    "identity": ident.version,
                }
            ),  # fmt: skip
            "loss_curves_md": MetadataValue.md(experiment_charts(found, decision)),
        },
    )


__all__ = [
    "ablation_pools",
    "data_admission",
    "experiment_basis",
    "mixture_search",
    "proxy_pools",
    "proxy_runs",
]
