"""Experiments on the Dagster side: what the experiment assets, the sensor, the jobs and the
CLI read from the instance and the store.

Lookups: the experiment basis, which shard groups are in the corpus, the pools of a variant (an
ablation's re-filtered pools are built on first use), a search's candidates and results, an
admission's evidence, noise risk, cleaning cost and latest operator review. Registering and
launching experiments is :mod:`jobs.experiment_launches`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance

from jobs.partitions import (
    SHARD_PARTITIONS_NAME,
)
from pretrain import identity, storage
from pretrain.charts import figure_png, png_markdown, pyplot
from pretrain.errors import ConfigError, DataError
from pretrain.experiments import registry
from pretrain.experiments.ablation import filtered_pool, with_overrides
from pretrain.experiments.admission import (
    AdmissionConfig,
    AdmissionEvidence,
    CleaningCost,
    NoiseRisk,
    admission_evidence,
    corpus_noise,
    noise_from_stats,
    yardstick_groups,
)
from pretrain.experiments.basis import validation_ids
from pretrain.experiments.config import DataVariant
from pretrain.experiments.decisions import (
    cleaning_cost,
    excluded_groups,
    latest_review,
    read_decisions,
)
from pretrain.experiments.pools import POOL_FILE, PoolInfo, read_pool
from pretrain.experiments.records import Warn, json_object, read_record, strings
from pretrain.experiments.run import ExperimentResult
from pretrain.experiments.search import (
    SearchConfig,
    SearchSpace,
    fit_chart_png,
    search_mixtures,
    search_report,
    search_skip_reason,
    verify_proposal,
)
from pretrain.filters.config import FilterConfig
from pretrain.mixture import documents_per_source
from resources.storage import ArtifactStore

# the stages whose CPU time is a group's cleaning cost
CLEANING_STAGES = ("raw_shards", "filtered_shards", "minhash_signatures", "deduped_shards")


def corpus_groups(instance: DagsterInstance, store: ArtifactStore) -> list[str]:
    """Shard groups whose deduplicated documents exist (completed, with an identity)."""
    shards = instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME)
    return sorted(s for s in shards if identity.read(store.uri("deduped_shards", s)) is not None)


def _basis_record(data: Any) -> dict[str, Any]:
    basis = json_object(data)
    strings(basis["shard_groups"], "shard_groups")
    if not isinstance(basis["seq_len"], int):
        raise TypeError(f"seq_len must be an integer, got {basis['seq_len']!r:.40}")
    return basis


def read_basis(store: ArtifactStore) -> dict[str, Any]:
    """The experiment basis's ``basis.json`` (its shard groups, ``seq_len``, sources); a
    ``DataError`` that says to materialize it when the root has none."""
    uri = store.uri("experiment_basis", "basis.json")
    if identity.read(store.uri("experiment_basis")) is None or not storage.exists(uri):
        raise DataError(
            f"no experiment basis under {store.root}: materialize experiment_basis first (the "
            "make_basis job; it needs deduped_shards, e.g. from `pretrain data`)"
        )
    return read_record(uri, _basis_record, "an experiment basis")


def admitted(
    instance: DagsterInstance, store: ArtifactStore, *, warn: Warn | None = None
) -> list[str]:
    """The shard groups in the experiments' corpus (``registry.admitted_groups``); a decision
    file that cannot be read raises, or with ``warn`` is skipped and reported."""
    decisions = read_decisions(store.uri("data_admission"), warn=warn)
    return registry.admitted_groups(
        corpus_groups(instance, store), read_basis(store)["shard_groups"], decisions
    )


def variant_pools(
    instance: DagsterInstance, store: ArtifactStore, variant: DataVariant
) -> tuple[list[PoolInfo], list[str]]:
    """(pools, their dirs) of ``variant``: the admitted groups, plus and minus its own."""
    groups = registry.variant_groups(admitted(instance, store), variant)
    if not variant.filter:
        dirs = [store.uri("proxy_pools", g) for g in groups]
        missing = [g for g, d in zip(groups, dirs, strict=True) if identity.read(d) is None]
        if missing:
            raise DataError(f"no token pool for shard groups {missing}: materialize proxy_pools")
        return [p for d in dirs for p in read_pool(d)], dirs
    basis = store.uri("experiment_basis")
    config = with_overrides(FilterConfig(), variant.filter)
    seq_len = read_basis(store)["seq_len"]
    dirs, pools = [], []
    for group in groups:  # an arm's pools: re-filtered once, shared by its seeds
        out = store.uri("proxy_pools", "_ablations", variant.digest(), group)
        inputs = [store.uri("raw_shards", group), store.uri("deduped_shards", group), basis]
        ident = identity.compute("ablation_pool", "ablation-v1", config, inputs)
        built = identity.read(out)
        if built is None or built.version != ident.version:
            rejects = store.uri("deduped_shards", group, "rejects.parquet")
            duplicates = (
                frozenset(storage.read_table(rejects, columns=["id"])["id"].to_pylist())
                if storage.exists(rejects)
                else frozenset()
            )
            filtered_pool(
                store.uri("raw_shards", group, "documents.parquet"), config,
                tokenizer_uri=storage.join(basis, "tokenizer"), out_dir=out, group=group,
                seq_len=seq_len, exclude_ids=validation_ids(basis), duplicate_ids=duplicates,
            )  # fmt: skip
            identity.write(out, ident)
        dirs.append(out)
        pools.extend(read_pool(out))
    return pools, dirs


@dataclass(frozen=True, kw_only=True)
class SearchFound:
    settings: dict[str, Any]
    inputs: list[str]
    report: dict[str, Any]
    summary: dict[str, Any]
    chart_md: str


def search_candidates(
    instance: DagsterInstance, store: ArtifactStore, config: SearchConfig
) -> tuple[SearchSpace, list[dict[str, float]], list[registry.ExperimentSpec]]:
    """The search's space, its mixtures (the sampled candidates, then the anchors) and their
    experiment specs, deterministic from config."""
    pools, _ = variant_pools(instance, store, DataVariant())
    space = SearchSpace.from_pools(
        pools, target_tokens=config.target_tokens, max_epochs=config.max_epochs,
        default_max_epochs=config.default_max_epochs,
    )  # fmt: skip
    mixtures = search_mixtures(space, config)
    specs = registry.search_specs(
        config.search_id(), list(mixtures.values()), recipe=config.recipe, seeds=config.seeds,
        labels=list(mixtures),
    )  # fmt: skip
    return space, list(mixtures.values()), specs


def _mean_targets(
    specs: Sequence[registry.ExperimentSpec],
    found: dict[str, ExperimentResult],
    config: SearchConfig,
) -> list[float]:
    """Each mixture's target, the mean over its seeds (``specs`` holds them seed-minor)."""
    per = len(config.seeds)
    return [
        float(np.mean([found[s.name].target(config.target) for s in specs[i : i + per]]))
        for i in range(0, len(specs), per)
    ]


def _results(store: ArtifactStore, specs: Sequence[registry.ExperimentSpec], what: str,
             config: SearchConfig) -> dict[str, ExperimentResult]:  # fmt: skip
    found = registry.results(store.root, [s.name for s in specs])
    missing = [s.name for s in specs if s.name not in found]
    if missing:
        raise DataError(
            f"{len(missing)} of {len(specs)} {what} proxies of {config.search_id()} have not "
            f"run (e.g. {missing[0]}): launch the search_mixture job (or `pretrain experiments "
            "search`); experiment_sensor runs the rest and fits the search when they are done"
        )
    return found


def search_fit(
    instance: DagsterInstance, store: ArtifactStore, config: SearchConfig
) -> tuple[dict[str, Any], list[registry.ExperimentSpec], dict[str, ExperimentResult]]:
    """(the regression's report over every candidate and anchor, their specs, their results);
    a DataError when one has not run."""
    space, candidates, specs = search_candidates(instance, store, config)
    found = _results(store, specs, "candidate", config)
    labels = [s.label for s in specs[:: len(config.seeds)]]
    report = search_report(space, config, candidates, _mean_targets(specs, found, config), labels)
    return report, specs, found


def verification_specs(
    config: SearchConfig, report: dict[str, Any]
) -> list[registry.ExperimentSpec]:
    """The regression's proposal as a proxy at the search's seeds (``SearchConfig.verify``)."""
    return registry.search_specs(config.search_id(), [report["regression_proposal"]],
                                 recipe=config.recipe, seeds=config.seeds, labels=["proposal"])  # fmt: skip


def fit_settings(config: SearchConfig) -> dict[str, Any]:
    """What the fit's identity is made of: every setting but the command's confirmation
    threshold, which changes nothing it measures."""
    settings = dataclasses.asdict(config)
    settings.pop("confirm_above")
    return settings


def search_result(
    instance: DagsterInstance, store: ArtifactStore, config: SearchConfig
) -> SearchFound:
    report, specs, found = search_fit(instance, store, config)
    if config.verify:
        checks = verification_specs(config, report)
        found = {**found, **_results(store, checks, "verification", config)}
        report = verify_proposal(report, _mean_targets(checks, found, config)[0])
        specs = [*specs, *checks]
    flops = sum(found[s.name].cost["flops"] for s in dict((s.name, s) for s in specs).values())
    summary = {
        "search_id": report["search_id"], "target": config.target,
        "proposed_weights": report["proposal"]["weights"],
        "predicted_target": report["proposal"]["predicted"],
        "predicted_target_natural": report["proposal"]["predicted_natural"],
        "heldout_spearman_lightgbm": report["heldout_spearman"]["lightgbm"],
        "heldout_spearman_linear": report["heldout_spearman"]["linear"],
        "proposed_by": report["model"],
        "chosen_by": report["proposal"]["chosen_by"],
        "choice": report["proposal"]["reason"],
        "anchors": report["anchors"],
        "candidates": config.candidates, "proxies": len(specs), "proxy_flops": flops,
    }  # fmt: skip
    report["proxy_flops"] = flops
    return SearchFound(
        settings={"config": fit_settings(config), "candidates": [s.name for s in specs]},
        inputs=[registry.result_dir(store.root, s.name) for s in specs],
        report=report,
        summary=summary,
        chart_md=png_markdown("held-out fit", fit_chart_png(report)),
    )


@dataclass(frozen=True, kw_only=True)
class AdmissionFound:
    evidence: AdmissionEvidence
    noise: NoiseRisk | None
    corpus_noise: NoiseRisk | None  # the admitted groups' funnel, the noise rule's yardstick
    cost: CleaningCost | None
    review: dict[str, Any] | None
    inputs: list[str]
    with_runs: list[ExperimentResult] = field(default_factory=list)
    without_runs: list[ExperimentResult] = field(default_factory=list)


def _cpu_seconds(instance: DagsterInstance, group: str) -> float | None:
    """CPU seconds the cleaning stages recorded for ``group`` (None when one did not)."""
    total = 0.0
    for stage in CLEANING_STAGES:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(stage), asset_partitions=[group]), limit=1
        ).records
        materialization = records[0].asset_materialization if records else None
        value = materialization.metadata.get("cpu_seconds") if materialization else None
        if value is None:
            return None
        seconds = value.value
        assert isinstance(seconds, int | float), f"{stage} cpu_seconds={seconds!r}"  # ours: float
        total += float(seconds)
    return total


def group_noise(store: ArtifactStore, group: str) -> NoiseRisk | None:
    """What the filter and dedup stages removed from ``group`` (None before they ran)."""
    filter_stats = store.uri("filtered_shards", group, "stats.json")
    dedup_stats = store.uri("deduped_shards", group, "stats.json")
    if not (storage.exists(filter_stats) and storage.exists(dedup_stats)):
        return None
    return noise_from_stats(storage.read_json(filter_stats), storage.read_json(dedup_stats))


def group_sources(store: ArtifactStore, group: str) -> set[str]:
    """The sources of a group's documents (its token pools; none before they are made)."""
    try:
        return {p.source for p in read_pool(store.uri("proxy_pools", group))}
    except DataError:
        return set()


def admission_inputs(
    instance: DagsterInstance,
    store: ArtifactStore,
    group: str,
    config: AdmissionConfig,
    *,
    warn: Warn | None = None,
) -> AdmissionFound:
    """What the admission of ``group`` reads; a review file that is not a valid review is
    skipped and reported through ``warn`` (the next older one holds)."""
    with_specs, without_specs = registry.admission_specs(
        group, recipe=config.recipe, seeds=config.seeds, probe_share=config.probe_share
    )
    names = [s.name for s in (*with_specs, *without_specs)]
    found = registry.results(store.root, names)
    missing = [n for n in names if n not in found]
    if missing:
        raise DataError(
            f"admission of {group!r}: experiments {missing} have not run; experiment_sensor "
            f"registers and runs them (or `pretrain experiments admit {group}`)"
        )
    with_runs = [found[s.name] for s in with_specs]
    without_runs = [found[s.name] for s in without_specs]
    peers = admitted(instance, store)
    sources = {g: group_sources(store, g) for g in [*peers, group]}
    evidence = admission_evidence(
        group=group, with_runs=with_runs, without_runs=without_runs, sources=sources[group]
    )
    noise = group_noise(store, group)
    corpus = corpus_noise(
        [n for g in yardstick_groups(group, sources, peers) if (n := group_noise(store, g))]
    )
    cpu = _cpu_seconds(instance, group)
    manifest = store.uri("raw_shards", group, "manifest.json")
    cost = (
        cleaning_cost(storage.read_json(manifest), cpu)
        if cpu is not None and storage.exists(manifest)
        else None
    )
    return AdmissionFound(
        evidence=evidence, noise=noise, corpus_noise=corpus, cost=cost,
        review=latest_review(store.uri("admission_reviews"), group, warn=warn),
        inputs=[registry.result_dir(store.root, n) for n in names],
        with_runs=with_runs, without_runs=without_runs,
    )  # fmt: skip


def experiment_charts(found: AdmissionFound) -> str:
    """Proxy loss curves with and without the group, one line per seed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    for runs, style, label in (
        (found.with_runs, "-", "with"),
        (found.without_runs, "--", "without"),
    ):
        for run in runs:
            steps, losses = zip(*run.loss_curve, strict=True) if run.loss_curve else ((), ())
            ax.plot(steps, losses, style, label=f"{label}, seed {run.spec['seed']}")
    ax.set_xlabel("proxy step")
    ax.set_ylabel("training loss")
    ax.set_title(f"proxies with and without {found.evidence.group}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png_markdown("proxy loss curves", figure_png(fig))


def check_variant(instance: DagsterInstance, store: ArtifactStore, variant: DataVariant) -> None:
    """Refuse a variant that names what the root does not hold, before it is registered: a
    shard group without deduplicated documents, a weighted source that no token pool of the
    corpus has (checked once pools exist), a setting ``FilterConfig`` does not have."""
    with_overrides(FilterConfig(), variant.filter)  # a ConfigError naming the setting
    named = [*variant.include_groups, *variant.exclude_groups, *variant.boost]
    for group in dict.fromkeys(named):
        check_group(instance, store, group)
    if not variant.weights:
        return
    dirs = [store.uri("proxy_pools", g) for g in corpus_groups(instance, store)]
    made = [d for d in dirs if storage.exists(storage.join(d, POOL_FILE))]
    sources = {p.source for d in made for p in read_pool(d)}
    unknown = sorted(set(variant.weights) - sources)
    if sources and unknown:
        raise ConfigError(
            f"weights name sources {unknown} that no token pool under {store.root} has; the "
            f"sources are {sorted(sources)}"
        )


def check_group(instance: DagsterInstance, store: ArtifactStore, group: str) -> None:
    """A ``ConfigError`` unless ``group`` is a shard group with deduplicated documents."""
    groups = corpus_groups(instance, store)
    if group not in groups:
        raise ConfigError(
            f"unknown shard group {group!r}: the groups with deduplicated documents under "
            f"{store.root} are {groups or 'none yet (run `pretrain data` first)'}"
        )


def search_skipped(
    instance: DagsterInstance, store: ArtifactStore, config: SearchConfig
) -> str | None:
    """Why ``config``'s search cannot run over the corpus (e.g. it has one source), or None:
    from the admitted groups' token pools once a basis exists (what the search weighs), else
    from every cleaned group's deduplicated documents that admission has not left out, so it
    is known before a basis or pool is made."""
    if storage.exists(store.uri("experiment_basis", "basis.json")):
        tokens: dict[str, int] = {}
        for group in admitted(instance, store):
            for pool in read_pool(store.uri("proxy_pools", group)):
                tokens[pool.source] = tokens.get(pool.source, 0) + pool.tokens
        return search_skip_reason(tokens, config)
    left_out = excluded_groups(read_decisions(store.uri("data_admission")), include_held=False)
    groups = [g for g in corpus_groups(instance, store) if g not in left_out]
    uris = [store.uri("deduped_shards", g, "documents.parquet") for g in groups]
    return search_skip_reason(documents_per_source(uris), config)
