"""What a search's fit and an admission's decision read, gathered from an :class:`ExperimentRoot`.

    root = ExperimentRoot(root="art", groups=groups)
    space, mixtures, specs = search_candidates(root, SearchConfig())
    found = search_result(root, SearchConfig())          # report, summary, chart, identity
    found = admission_inputs(root, "web-0007", AdmissionConfig(), cpu_seconds=12.5)
    decision = decide(found, AdmissionConfig())           # the policy over the evidence

Plain inputs only (an artifact root and its groups; the cleaning stages' CPU seconds, which the
Dagster side reads from its materializations): the ``mixture_search`` and ``data_admission``
assets, the CLI and ``bench/data_roi.py`` call the same functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pretrain import storage
from pretrain.charts import figure_png, png_markdown, pyplot
from pretrain.errors import DataError
from pretrain.experiments import registry
from pretrain.experiments.admission import (
    AdmissionConfig,
    AdmissionDecision,
    AdmissionEvidence,
    CleaningCost,
    NoiseRisk,
    admission_evidence,
    corpus_noise,
    decide_admission,
    yardstick_groups,
)
from pretrain.experiments.config import DataVariant, get_proxy_recipe
from pretrain.experiments.corpus import ExperimentRoot, sources_of
from pretrain.experiments.decisions import cleaning_cost, excluded_groups, latest_review
from pretrain.experiments.pools import POOL_FILE
from pretrain.experiments.records import Warn
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
from pretrain.mixture import documents_per_source

# -- mixture search -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SearchFound:
    settings: dict[str, Any]
    inputs: list[str]
    report: dict[str, Any]
    summary: dict[str, Any]
    chart_md: str


def search_skipped(root: ExperimentRoot, config: SearchConfig) -> str | None:
    """Why ``config``'s search cannot run over the corpus (e.g. it has one source), or None:
    over the admitted groups once a basis exists (what the search weighs: their pools, or
    their deduplicated documents before the pools are made), else over every cleaned group
    that admission has not left out."""
    basis = root.uri("experiment_basis", "basis.json")
    if storage.exists(basis):
        made = storage.read_json(basis)
        groups = registry.admitted_groups(list(root.groups), made["shard_groups"], root.decisions())
        pooled = [root.uri("proxy_pools", g, POOL_FILE) for g in groups]
        if groups and all(storage.exists(uri) for uri in pooled):  # what the search weighs
            tokens: dict[str, int] = {}
            for group in groups:
                for source, n in sources_of(root.pools_of(group)).items():
                    tokens[source] = tokens.get(source, 0) + n
            return search_skip_reason(tokens, config)
    else:
        left_out = excluded_groups(root.decisions(), include_held=False)
        groups = [g for g in root.groups if g not in left_out]
    uris = [root.uri("deduped_shards", g, "documents.parquet") for g in groups]
    return search_skip_reason(documents_per_source(uris), config)


def search_candidates(
    root: ExperimentRoot, config: SearchConfig
) -> tuple[SearchSpace, list[dict[str, float]], list[registry.ExperimentSpec]]:
    """The search's space, its mixtures (the sampled candidates, then the anchors) and their
    experiment specs, deterministic from config."""
    pools, _ = root.variant_pools(DataVariant())
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


def results_of(
    root: ExperimentRoot, specs: Sequence[registry.ExperimentSpec], what: str, hint: str
) -> dict[str, ExperimentResult]:
    """The results of ``specs`` that count; a ``DataError`` naming the first missing one."""
    found = registry.results(root.root, [s.name for s in specs])
    missing = [s.name for s in specs if s.name not in found]
    if missing:
        raise DataError(
            f"{len(missing)} of {len(specs)} {what} proxies have not run (e.g. {missing[0]}): "
            + hint
        )
    return found


def _search_results(
    root: ExperimentRoot, specs: Sequence[registry.ExperimentSpec], what: str, config: SearchConfig
) -> dict[str, ExperimentResult]:
    hint = (
        f"launch {config.search_id()} with the launch_search job (or `pretrain experiments "
        "search`); experiment_sensor runs the rest and fits the search when they are done"
    )
    return results_of(root, specs, what, hint)


def search_fit(
    root: ExperimentRoot, config: SearchConfig
) -> tuple[dict[str, Any], list[registry.ExperimentSpec], dict[str, ExperimentResult]]:
    """(the regression's report over every candidate and anchor, their specs, their results);
    a DataError when one has not run."""
    space, candidates, specs = search_candidates(root, config)
    found = _search_results(root, specs, "candidate", config)
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


def search_result(root: ExperimentRoot, config: SearchConfig) -> SearchFound:
    """The fit, its verification (``SearchConfig.verify``), its summary, chart and inputs."""
    report, specs, found = search_fit(root, config)
    if config.verify:
        checks = verification_specs(config, report)
        found = {**found, **_search_results(root, checks, "verification", config)}
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
        "warnings": target_warnings(root, config.target),
    }  # fmt: skip
    report["proxy_flops"] = flops
    return SearchFound(
        settings={"config": fit_settings(config), "candidates": [s.name for s in specs]},
        inputs=[registry.result_dir(root.root, s.name) for s in specs],
        report=report,
        summary=summary,
        chart_md=png_markdown("held-out fit", fit_chart_png(report)),
    )


def target_warnings(root: ExperimentRoot, target: str) -> list[str]:
    """The basis's size warnings for the yardstick a search target names."""
    basis = root.basis()
    key = target[4:] if target.startswith("bpb:") else target
    if key == "mean_bpb":
        return [w for ws in basis.get("warnings", {}).values() for w in ws]
    return list(basis.get("warnings", {}).get(key, []))


# -- admission ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AdmissionFound:
    evidence: AdmissionEvidence
    noise: NoiseRisk | None
    corpus_noise: NoiseRisk | None  # the admitted groups' funnel, the noise rule's yardstick
    cost: CleaningCost | None
    review: dict[str, Any] | None
    inputs: list[str]
    runs: dict[str, list[ExperimentResult]] = field(default_factory=dict)  # arm -> results


def admission_arms(
    root: ExperimentRoot, group: str, config: AdmissionConfig
) -> registry.AdmissionArms:
    """The arms of ``group``'s admission: its reference arm when the basis holds clean data of
    its kind (a reserve of that source)."""
    kind = root.kind(group)
    return registry.admission_specs(
        group, recipe=config.recipe, seeds=config.seeds, probe_share=config.probe_share,
        kind=kind if kind in root.reserve_kinds() else None,
    )  # fmt: skip


def admission_inputs(
    root: ExperimentRoot,
    group: str,
    config: AdmissionConfig,
    *,
    cpu_seconds: float | None = None,
    warn: Warn | None = None,
) -> AdmissionFound:
    """What the admission of ``group`` reads; a review file that is not a valid review is
    skipped and reported through ``warn`` (the next older one holds)."""
    arms = admission_arms(root, group, config)
    hint = f"experiment_sensor registers and runs them (or `pretrain experiments admit {group}`)"
    found = results_of(root, arms.all(), f"admission of {group!r}:", hint)
    runs = {
        arm: [found[s.name] for s in specs]
        for arm, specs in zip(("with", "without", "floor", "reference"), arms, strict=True)
    }
    peers = root.admitted()
    sources = {g: root.sources(g) for g in [*peers, group]}
    basis, langs, kind = root.basis(), root.languages(group), root.kind(group)
    evidence = admission_evidence(
        group=group, with_runs=runs["with"], without_runs=runs["without"],
        floor_runs=runs["floor"], reference_runs=runs["reference"], sources=sources[group],
        kind=kind, language=max(langs, key=langs.__getitem__, default=None),
        language_share=max(langs.values(), default=None),
        targets=basis.get("targets", {}),
        yardsticks={k: {**v, "warnings": basis.get("warnings", {}).get(k, [])}
                    for k, v in basis.get("yardsticks", {}).items()},
        reserve_tokens=basis.get("reserve", {}).get(kind),
        reference_from=basis.get("reserve_from", {}).get(kind, []),
    )  # fmt: skip
    corpus = corpus_noise(
        [n for g in yardstick_groups(group, sources, peers) if (n := root.noise(g))]
    )
    manifest = root.uri("raw_shards", group, "manifest.json")
    cost = (
        cleaning_cost(storage.read_json(manifest), cpu_seconds)
        if cpu_seconds is not None and storage.exists(manifest)
        else None
    )
    return AdmissionFound(
        evidence=evidence, noise=root.noise(group), corpus_noise=corpus, cost=cost,
        review=latest_review(root.uri("admission_reviews"), group, warn=warn),
        inputs=[registry.result_dir(root.root, s.name) for s in arms.all()], runs=runs,
    )  # fmt: skip


def decide(found: AdmissionFound, config: AdmissionConfig) -> AdmissionDecision:
    """The policy over what :func:`admission_inputs` found ("cannot see" names the recipe
    the ladder goes to next)."""
    return decide_admission(
        found.evidence, noise=found.noise, cost=found.cost, policy=config.policy,
        corpus=found.corpus_noise, next_recipe=get_proxy_recipe(config.recipe).next_scale,
    )  # fmt: skip


ARM_STYLE = {"with": "-", "without": "--", "floor": ":", "reference": "-."}


def experiment_charts(found: AdmissionFound, decision: AdmissionDecision | None = None) -> str:
    """Proxy loss curves of every arm, one line per seed; with ``decision``, the title says
    the verdict ("cannot see" included)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    for arm, runs in found.runs.items():
        for run in runs:
            steps, losses = zip(*run.loss_curve, strict=True) if run.loss_curve else ((), ())
            ax.plot(steps, losses, ARM_STYLE[arm], label=f"{arm}, seed {run.spec['seed']}")
    ax.set_xlabel("proxy step")
    ax.set_ylabel("training loss")
    title = f"proxies of {found.evidence.group}'s admission"
    if decision is not None:
        verdict = "hold: cannot see" if decision.cannot_see else decision.decision
        value = decision.relative
        title += f": {verdict}" + (
            f" (value {value.value:.2f} ± {value.spread:.2f})"
            if value is not None and not decision.cannot_see
            else ""
        )
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return png_markdown("proxy loss curves", figure_png(fig))
