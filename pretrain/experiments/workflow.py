"""The data-value engine's workflow: from what the root holds to the runs that come next.

``experiment_sensor`` is this module with a Dagster face: each tick it gathers the state of an
artifact root (:func:`gather`), asks the pure :func:`next_steps` what to run, and turns the
steps into run requests::

    state = gather(ExperimentRoot(root="art", groups=groups), AdmissionConfig(), warn=log)
    steps = next_steps(state, AdmissionConfig())
    steps.requests        # (Step(job="run_proxies", partition="admit-with-…-s0", …), …)
    steps.partitions      # experiment names to add as ``experiments`` partitions

The steps, in order of what waits for what:

1. **Admission.** A shard group whose deduplicated documents exist, that the basis does not hold
   and that has no decision yet is *pending*. Every pool the experiments read must be current
   first (``make_pools``); then the start proxies an anneal recipe continues; then the arms of
   each pending group (with it, without, its floor, a reference of clean data of its kind: the
   without and reference arms are shared and asked for once); then its decision
   (``decide_admission``).
2. **Reviews.** An operator review newer than the one a group's decision applied re-decides it.
3. **Searches.** A launched search's candidates once the proxies they continue have run (an
   anneal search); once every candidate has, its verification proxies (``SearchConfig.verify``);
   then the fit (``fit_search``).
4. **Ablations.** A filter arm's proxies once its pools are made (``ablation_pools``).

Run keys name the versions the step was decided on, so a replayed tick asks for nothing new.
:func:`gather` reads the root and registers the experiments it will ask for (idempotent: the
same spec twice is one file); a file it cannot read is skipped and reported through ``warn``,
and what depends on it waits (:attr:`ExperimentState.blocked`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pretrain import identity, storage
from pretrain.errors import ConfigError, DataError
from pretrain.experiments import registry
from pretrain.experiments.admission import AdmissionConfig
from pretrain.experiments.corpus import AblationArm, ExperimentRoot, ablation_arms
from pretrain.experiments.decisions import DECISION_FILE, decision_records, latest_review
from pretrain.experiments.records import Warn
from pretrain.experiments.search import SearchConfig

Fitter = Callable[[SearchConfig, dict[str, Any]], list[str]]  # a search's verification names


@dataclass(frozen=True, kw_only=True)
class SearchState:
    """A launched search as its launch record holds it, and its verification proxies (None
    until its candidates have all run, or with ``verify`` off)."""

    search_id: str
    settings: dict[str, Any]  # the launch record's config (the fit runs with it)
    names: tuple[str, ...]
    starts: tuple[str, ...]
    candidates_launched: bool
    verification: tuple[str, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class ExperimentState:
    """What :func:`next_steps` decides from (plain data; see :func:`gather`)."""

    basis_groups: tuple[str, ...]
    groups: tuple[str, ...]  # shard groups with deduplicated documents
    decisions: dict[str, dict[str, Any]]  # group -> its decision record (the readable ones)
    decided: frozenset[str]  # groups with a decision file, readable or not
    stale_pools: dict[str, str]  # group -> its deduplicated documents' version (pools to make)
    starts: tuple[str, ...] = ()  # the start proxies the pending admissions continue
    arms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pending group -> arm names
    blocked: dict[str, str] = field(default_factory=dict)  # group or search -> why it waits
    done: frozenset[str] = frozenset()  # experiments with a result that counts
    versions: dict[str, str] = field(default_factory=dict)  # experiment -> its result version
    reviews: dict[str, str] = field(default_factory=dict)  # group -> its latest review's time
    searches: tuple[SearchState, ...] = ()
    ablations: tuple[AblationArm, ...] = ()

    @property
    def admitted(self) -> list[str]:
        plain = {g: str(r["decision"]) for g, r in self.decisions.items()}
        return registry.admitted_groups(list(self.groups), list(self.basis_groups), plain)

    @property
    def pending(self) -> list[str]:
        return [g for g in self.groups if g not in self.basis_groups and g not in self.decided]


@dataclass(frozen=True)
class Step:
    """One run to request: its job, partition, run key and stage settings."""

    job: str
    partition: str | None
    run_key: str
    settings: dict[str, Any] | None = None  # {stage: settings}, e.g. {"search": {...}}


@dataclass(frozen=True)
class Steps:
    requests: tuple[Step, ...] = ()
    partitions: tuple[str, ...] = ()  # experiment names to add as partitions


def _proxy(name: str) -> Step:
    return Step("run_proxies", name, f"proxy:{name}")


def _version(names: list[str] | tuple[str, ...], versions: dict[str, str]) -> str:
    """Names the results a decision or a fit would read (a new result: a new run key)."""
    found = [versions.get(n, "none") for n in names]
    return hashlib.sha256(json.dumps(found).encode()).hexdigest()[:12]


def admission_settings(config: AdmissionConfig) -> dict[str, Any]:
    """``decide_admission``'s settings: ``config`` as the sensor tried the group (an
    operator's review is given at launch, never by the sensor)."""
    settings = dataclasses.asdict(config)
    settings.pop("review", None)
    return {"admission": settings}


def next_steps(state: ExperimentState, config: AdmissionConfig) -> Steps:
    """What to run next (see the module docstring); pure."""
    admissions = _admission_steps(state, config)
    reviews = [
        Step("decide_admission", group, f"review:{group}:{at}", admission_settings(config))
        for group, at in sorted(state.reviews.items())
        if group in state.decisions and (state.decisions[group].get("review") or {}).get("at") != at
    ]
    searches = _search_steps(state)
    ablations = [  # a filter arm's proxies, once its pools are made
        _proxy(n) for arm in state.ablations if arm.ready for n in arm.names if n not in state.done
    ]
    return Steps(
        requests=(*admissions.requests, *reviews, *searches.requests, *ablations),
        partitions=tuple(dict.fromkeys((*admissions.partitions, *searches.partitions))),
    )


def _admission_steps(state: ExperimentState, config: AdmissionConfig) -> Steps:
    pending = state.pending
    pools = [
        Step("make_pools", g, f"pools:{g}:{state.stale_pools[g]}")
        for g in [*state.admitted, *pending]
        if g in state.stale_pools
    ]
    if pools:
        return Steps(requests=tuple(pools))  # experiments wait for their pools
    if not pending or "starts" in state.blocked:
        return Steps()
    requests = [_proxy(n) for n in state.starts if n not in state.done]
    partitions = list(state.starts)
    if requests:  # the arms wait for the proxies they continue
        return Steps(requests=tuple(requests), partitions=tuple(partitions))
    asked: set[str] = set()
    for group in pending:
        if group in state.blocked or group not in state.arms:
            continue
        names = state.arms[group]
        partitions += names
        todo = [n for n in names if n not in state.done]
        requests += [_proxy(n) for n in todo if n not in asked]  # shared arms: once
        asked.update(todo)
        if not todo:
            key = f"admission:{group}:{_version(names, state.versions)}"
            requests.append(Step("decide_admission", group, key, admission_settings(config)))
    return Steps(requests=tuple(requests), partitions=tuple(partitions))


def _search_steps(state: ExperimentState) -> Steps:
    requests: list[Step] = []
    partitions: list[str] = []
    for search in state.searches:
        todo = [n for n in search.names if n not in state.done]
        if todo and not search.candidates_launched:
            if all(n in state.done for n in search.starts):
                requests += [_proxy(n) for n in todo]
            continue
        if not search.names or todo or search.search_id in state.blocked:
            continue
        checks = search.verification or ()
        partitions += checks
        waiting = [n for n in checks if n not in state.done]
        if waiting:
            requests += [_proxy(n) for n in waiting]
            continue
        if search.settings.get("verify", True) and search.verification is None:
            continue  # its verification is not known yet
        key = f"fit:{search.search_id}:{_version([*search.names, *checks], state.versions)}"
        requests.append(Step("fit_search", None, key, {"search": search.settings}))
    return Steps(requests=tuple(requests), partitions=tuple(partitions))


# -- reading the state ---------------------------------------------------------------------------


def gather(
    root: ExperimentRoot,
    config: AdmissionConfig,
    *,
    warn: Warn,
    searches: Sequence[tuple[SearchConfig, dict[str, Any]]] = (),
    verify: Fitter | None = None,
) -> ExperimentState:
    """The state of ``root`` for :func:`next_steps`: its basis, groups, decisions, pools,
    the arms and starts of pending admissions (registered), the launched ``searches`` (their
    verification names from ``verify`` once their candidates have run), which experiments
    have a result that counts, and the latest valid review of each decided group."""
    basis_groups = tuple(root.basis()["shard_groups"])
    records = decision_records(root.uri("data_admission"), warn=warn)
    decided = frozenset(
        g for g in root.groups if storage.exists(root.uri("data_admission", g, DECISION_FILE))
    )
    base = ExperimentState(
        basis_groups=basis_groups, groups=root.groups, decisions=records, decided=decided,
        stale_pools={},
    )  # fmt: skip
    stale: dict[str, str] = {}
    for group in [*base.admitted, *base.pending]:  # every pool the experiments read, current
        deduped = identity.read(root.uri("deduped_shards", group))
        if deduped is not None and not identity.is_current(root.uri("proxy_pools", group)):
            stale[group] = deduped.version
    blocked: dict[str, str] = {}
    starts: list[str] = []
    arms: dict[str, tuple[str, ...]] = {}
    if base.pending and not stale:
        starts = _registered(root, registry.starts_of(config.recipe, config.seeds), "starts",
                             blocked, warn)  # fmt: skip
        reserve = root.reserve_kinds()
        for group in base.pending:
            kind = root.kind(group)
            specs = registry.admission_specs(
                group, recipe=config.recipe, seeds=config.seeds, probe_share=config.probe_share,
                kind=kind if kind in reserve else None,
            ).all()  # fmt: skip
            names = _registered(root, specs, group, blocked, warn)
            if group not in blocked:
                arms[group] = tuple(names)
    found: list[SearchState] = []
    for search_config, record in searches:
        found.append(_search_state(root, search_config, record, blocked, warn, verify))
    ablations = tuple(ablation_arms(root, warn=warn))
    names = [*starts, *(n for a in arms.values() for n in a),
             *(n for s in found for n in (*s.names, *s.starts, *(s.verification or ()))),
             *(n for arm in ablations if arm.ready for n in arm.names)]  # fmt: skip
    results = registry.results(root.root, list(dict.fromkeys(names)), warn=warn)
    versions = {n: _result_version(root, n) for n in results}
    reviews = {}
    for group in records:
        review = latest_review(root.uri("admission_reviews"), group, warn=warn)
        if review is not None:
            reviews[group] = str(review["at"])
    return dataclasses.replace(
        base, stale_pools=stale, starts=tuple(starts), arms=arms, blocked=blocked,
        done=frozenset(results), versions=versions, reviews=reviews, searches=tuple(found),
        ablations=ablations,
    )  # fmt: skip


def _registered(
    root: ExperimentRoot,
    specs: list[registry.ExperimentSpec],
    owner: str,
    blocked: dict[str, str],
    warn: Warn,
) -> list[str]:
    """Register ``specs`` (their names); a spec file that cannot be read blocks ``owner``."""
    try:
        for spec in specs:
            registry.register(root.root, spec)
    except (DataError, ConfigError) as exc:
        blocked[owner] = str(exc)
        warn(f"{exc}: {owner} waits until it is fixed or removed")
    return [s.name for s in specs]


def _result_version(root: ExperimentRoot, name: str) -> str:
    made = identity.read(registry.result_dir(root.root, name))
    return made.version if made else "none"


def _search_state(
    root: ExperimentRoot,
    config: SearchConfig,
    record: dict[str, Any],
    blocked: dict[str, str],
    warn: Warn,
    verify: Fitter | None,
) -> SearchState:
    """A launched search; its verification names once its candidates have all run."""
    names = tuple(record.get("names") or ())
    verification: tuple[str, ...] | None = tuple(record.get("verification") or ()) or None
    done = registry.results(root.root, list(names), warn=warn)
    if config.verify and verification is None and names and len(done) == len(set(names)):
        try:
            verification = tuple(verify(config, record)) if verify else None
        except DataError as exc:  # e.g. a candidate's spec that cannot be read: it waits
            blocked[config.search_id()] = str(exc)
            warn(f"{exc}: the fit of {config.search_id()} waits until it is fixed or removed")
    return SearchState(
        search_id=config.search_id(),
        settings=dict(record["config"]),
        names=names,
        starts=tuple(record.get("starts") or ()),
        candidates_launched=bool(record.get("candidates_launched", True)),
        verification=verification if config.verify else (),
    )
