"""The data-value engine's workflow: from what the root holds to the runs that come next.

``experiment_sensor`` is this module with a Dagster face: each tick it gathers the state of an
artifact root (:func:`gather`), asks the pure :func:`next_steps` what to run, and turns the
steps into run requests::

    state = gather(ExperimentRoot(root="art", groups=groups), AdmissionConfig(), warn=log)
    steps = next_steps(state, AdmissionConfig())
    steps.requests        # (Step(job="proxy_runs", partition="admit-with-…-s0", …), …)
    steps.partitions      # experiment names to add as ``experiments`` partitions

The steps, in order of what waits for what:

1. **Admission.** A shard group whose deduplicated documents exist, that the basis does not hold
   and that has no decision yet is *pending*. Every pool the experiments read must be current
   first (``proxy_pools``); then the start proxies an anneal recipe continues; then the arms of
   each pending group (with it, without, its floor, a reference of clean data of its kind: the
   without and reference arms are shared and asked for once); then its decision
   (``data_admission``).
2. **Reviews.** An operator review newer than the one a group's decision applied re-decides it.
3. **Searches.** A launched search's candidates once the proxies they continue have run (an
   anneal search); once every candidate has, its verification proxies (``SearchConfig.verify``);
   then the fit (``mixture_search``).
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
from pretrain.experiments.decisions import DECISION_FILE, decision_record, latest_review
from pretrain.experiments.records import Warn, read_records
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
    # admitted or pending group -> its deduplicated documents' version: pools to make
    stale_pools: dict[str, str]
    starts: tuple[str, ...] = ()  # the start proxies the pending admissions continue
    arms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pending group -> arm names
    blocked: dict[str, str] = field(default_factory=dict)  # group or search -> why it waits
    done: frozenset[str] = frozenset()  # experiments with a result that counts
    versions: dict[str, str] = field(default_factory=dict)  # experiment -> its result version
    reviews: dict[str, str] = field(default_factory=dict)  # group -> its latest review's time
    review_files: dict[str, str] = field(default_factory=dict)  # group -> newest review file
    searches: tuple[SearchState, ...] = ()
    ablations: tuple[AblationArm, ...] = ()

    @property
    def admitted(self) -> list[str]:
        plain = {g: str(r["decision"]) for g, r in self.decisions.items()}
        return registry.admitted_groups(list(self.groups), list(self.basis_groups), plain)

    @property
    def pending(self) -> list[str]:
        settled = {*self.basis_groups, *self.decided}  # a set: thousands of groups each tick
        return [g for g in self.groups if g not in settled]


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
    return Step("proxy_runs", name, f"proxy:{name}")


def _version(names: list[str] | tuple[str, ...], versions: dict[str, str]) -> str:
    """Names the results a decision or a fit would read (a new result: a new run key)."""
    found = [versions.get(n, "none") for n in names]
    return hashlib.sha256(json.dumps(found).encode()).hexdigest()[:12]


def admission_settings(config: AdmissionConfig) -> dict[str, Any]:
    """``data_admission``'s settings: ``config`` as the sensor tried the group (an
    operator's review is given at launch, never by the sensor)."""
    settings = dataclasses.asdict(config)
    settings.pop("review", None)
    return {"admission": settings}


def next_steps(state: ExperimentState, config: AdmissionConfig) -> Steps:
    """What to run next (see the module docstring); pure."""
    admissions = _admission_steps(state, config)
    reviews = [
        Step("data_admission", group, f"review:{group}:{at}", admission_settings(config))
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
    pools = [  # stale_pools holds only groups whose pools the experiments read
        Step("proxy_pools", g, f"pools:{g}:{state.stale_pools[g]}")
        for g in sorted(state.stale_pools)
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
            requests.append(Step("data_admission", group, key, admission_settings(config)))
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
        requests.append(Step("mixture_search", None, key, {"search": search.settings}))
    return Steps(requests=tuple(requests), partitions=tuple(partitions))


# -- reading the state ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Since:
    """What a look can take from the one before it (the sensor keeps this in its cursor) and
    from the instance: so a look reads what changed, not every group's files.

    ``remade``: the output folders written since the last look (a new deduplicated shard, pool,
    basis, result), every other output is as it was then; ``decided``: the groups with a
    decision; ``stale_pools``, ``done`` and ``reviews``: what the last look found."""

    decided: frozenset[str]
    remade: frozenset[str] = frozenset()
    full: bool = False  # look at every group again (a reset cursor, other settings)
    # a first look in parts (:func:`first_look_part`): these groups now, as a full look reads
    # them; ``stale_pools`` holds what the parts before found
    only: frozenset[str] | None = None
    stale_pools: dict[str, str] = field(default_factory=dict)
    done: dict[str, str] = field(default_factory=dict)  # experiment -> its result version
    reviews: dict[str, str] = field(default_factory=dict)  # group -> newest review file seen


def gather(
    root: ExperimentRoot,
    config: AdmissionConfig,
    *,
    warn: Warn,
    searches: Sequence[tuple[SearchConfig, dict[str, Any]]] = (),
    verify: Fitter | None = None,
    since: Since | None = None,
) -> ExperimentState:
    """The state of ``root`` for :func:`next_steps`: its basis, groups, decisions, the pools
    to make, the arms and starts of pending admissions (registered), the launched ``searches``
    (their verification names from ``verify`` once their candidates have run), which
    experiments have a result that counts, and the reviews not applied yet.

    Without ``since`` this is a full look: every group's decision and pools are read. With it,
    only the groups and results whose inputs were ``since.remade`` are looked at again; the
    rest is taken from the last look. A pool or a result counts as current when the outputs it
    was made from are (one level: a stale upstream makes it stale once that is remade)."""
    basis_groups = tuple(root.basis()["shard_groups"])
    remade = since.remade if since is not None else frozenset()
    part = since.only if since is not None else None
    trust = since is not None and not since.full and part is None  # not remade: as they were
    look = identity.Look(unchanged=(lambda uri: uri not in remade) if trust else None)
    if since is None:
        decided = frozenset(
            g for g in root.groups if storage.exists(root.uri("data_admission", g, DECISION_FILE))
        )
    else:
        decided = since.decided & frozenset(root.groups)
    whole = since is None or since.full or root.uri("experiment_basis") in remade
    touched = part if part is not None else set() if whole else _touched(root, remade)
    recheck = [g for g in root.groups if (whole and part is None) or g in touched]
    decisions = _decisions(root, [g for g in recheck if g in decided], warn)
    look.prefetch(root.uri(a, g) for g in recheck for a in ("deduped_shards", "proxy_pools"))
    kept = {} if whole or since is None else since.stale_pools
    stale = {g: v for g, v in kept.items() if g in root.groups and g not in recheck}
    for group in recheck:
        if group in decided:  # admitted by its decision (unreadable: neither way)
            read_pools = decisions.get(group, {}).get("decision") == "admit"
        else:  # a basis group, or a pending one: both read their pools
            read_pools = True
        deduped = look.read(root.uri("deduped_shards", group))
        current = look.is_current(root.uri("proxy_pools", group), transitive=False)
        if read_pools and deduped is not None and not current:
            stale[group] = deduped.version
    reviews, reviewed, review_files = _reviews(root, decided, since, warn)
    decisions.update(reviewed)
    base = ExperimentState(
        basis_groups=basis_groups, groups=root.groups, decisions=decisions, decided=decided,
        stale_pools=stale, reviews=reviews, review_files=review_files,
    )  # fmt: skip
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
        found.append(_search_state(root, search_config, record, blocked, warn, verify, look))
    ablations = tuple(ablation_arms(root, warn=warn, look=look))
    names = [*starts, *(n for a in arms.values() for n in a),
             *(n for s in found for n in (*s.names, *s.starts, *(s.verification or ()))),
             *(n for arm in ablations if arm.ready for n in arm.names)]  # fmt: skip
    versions = _results(root, list(dict.fromkeys(names)), since, look, warn)
    return dataclasses.replace(
        base, starts=tuple(starts), arms=arms, blocked=blocked, done=frozenset(versions),
        versions=versions, searches=tuple(found), ablations=ablations,
    )  # fmt: skip


FIRST_LOOK_GROUPS = 2000  # groups a first look reads per tick (S3: about 6,000 files, 20 s)


def first_look_part(
    groups: Sequence[str], after: str | None, size: int = FIRST_LOOK_GROUPS
) -> tuple[frozenset[str], str | None]:
    """The next part of a first look too large for one sensor tick (Dagster cancels a tick
    after 60 s; at 10,000 groups on S3 a whole look takes two minutes): the ``size`` groups
    named after ``after`` (None: from the start), and the last of them, or None when this
    part ends the look. Parts follow names, not positions, so a group removed meanwhile
    does not make the next part skip one."""
    ordered = sorted(g for g in groups if after is None or g > after)
    part = ordered[:size]
    return frozenset(part), (part[-1] if len(ordered) > size else None)


def plan_look(
    seen: dict[str, Any],
    *,
    same: bool,
    groups: Sequence[str],
    decided: frozenset[str],
    remade: frozenset[str],
    newest: dict[str, int],
    part_size: int = FIRST_LOOK_GROUPS,
) -> tuple[Since, dict[str, int], str | None]:
    """What a sensor's look reads, from its cursor ``seen`` (``same``: it was written with
    these settings after a complete look; ``remade``: the outputs materialized since): the
    :class:`Since` for :func:`gather`, the newest materializations to remember (those of when
    a first look in parts began), and the last group of this part when more parts follow."""
    if same:
        since = Since(decided=decided, remade=remade, stale_pools=seen.get("stale_pools", {}),
                      done=seen.get("done", {}), reviews=seen.get("review_files", {}))  # fmt: skip
        return since, newest, None
    if len(groups) <= part_size:
        return Since(decided=decided, full=True), newest, None
    first = seen.get("first_look") or {}  # the parts read so far (with these settings)
    part, last = first_look_part(groups, first.get("after"), part_size)
    since = Since(decided=decided, only=part, stale_pools=first.get("stale_pools", {}))
    return since, first.get("newest", newest), last


def _feeds_results(root: ExperimentRoot, uri: str) -> bool:
    """Whether a remade output can change which experiment results count."""
    return any(uri.startswith(root.uri(stage)) for stage in (
        "proxy_pools", "experiment_basis", "proxy_runs", "ablation_pools"))  # fmt: skip


def _touched(root: ExperimentRoot, remade: frozenset[str]) -> set[str]:
    """The groups whose deduplicated documents, pools or decision changed since: read from
    what was remade (a few outputs), not from every group of the campaign."""
    touched = set()
    for stage in ("deduped_shards", "proxy_pools", "data_admission"):
        prefix = root.uri(stage) + "/"
        for uri in remade:
            group = uri[len(prefix) :] if uri.startswith(prefix) else ""
            if group and root.uri(stage, group) == uri:
                touched.add(group)
    return touched


def _decisions(root: ExperimentRoot, groups: list[str], warn: Warn) -> dict[str, dict[str, Any]]:
    """The decision records of ``groups`` (one that cannot be read: skipped and named)."""
    uris = [root.uri("data_admission", g, DECISION_FILE) for g in groups]
    found = read_records(uris, decision_record, "an admission decision", warn=warn)
    return {str(r["group"]): r for _, r in found}


def _reviews(
    root: ExperimentRoot, decided: frozenset[str], since: Since | None, warn: Warn
) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, str]]:
    """(group -> its latest valid review's time, group -> its decision record) for the decided
    groups with a review file the last look did not see, and group -> its newest review file
    (what this look saw): one listing of the reviews, then the new ones read."""
    newest: dict[str, str] = {}
    for uri in storage.list_files(root.uri("admission_reviews"), (".json",)):
        group, name = uri.rsplit("/", 2)[-2:]
        newest[group] = max(newest.get(group, ""), name)
    seen = since.reviews if since is not None and not since.full else {}
    fresh = sorted(g for g, name in newest.items() if g in decided and seen.get(g) != name)
    reviews: dict[str, str] = {}
    for group in fresh:
        review = latest_review(root.uri("admission_reviews"), group, warn=warn)
        if review is not None:
            reviews[group] = str(review["at"])
    return reviews, _decisions(root, sorted(reviews), warn), newest


def _results(
    root: ExperimentRoot, names: list[str], since: Since | None, look: identity.Look, warn: Warn
) -> dict[str, str]:
    """Experiment -> its result's version, for those of ``names`` whose result counts. A
    result that counted at the last look and whose inputs were not remade since is only read
    again when it was remade itself."""
    known = since.done if since is not None and not since.full else {}
    remade = since.remade if since is not None else frozenset()
    # no pool, basis or result written since: a result that counted then counts now, unread
    quiet = not any(_feeds_results(root, uri) for uri in remade)
    found: dict[str, str] = {n: known[n] for n in names if quiet and n in known}
    todo = []
    for name in (n for n in names if n not in found):
        where = registry.result_dir(root.root, name)
        if name in known and where not in remade:
            made = look.read(where)
            if (
                made is not None
                and made.version == known[name]
                and look.is_current(where, transitive=False)
            ):
                found[name] = made.version
                continue
        todo.append(name)
    for name in registry.results(root.root, todo, warn=warn, look=look):
        made = look.read(registry.result_dir(root.root, name))
        found[name] = made.version if made else "none"
    return found


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
    look: identity.Look,
) -> SearchState:
    """A launched search; its verification names once its candidates have all run."""
    names = tuple(record.get("names") or ())
    verification: tuple[str, ...] | None = tuple(record.get("verification") or ()) or None
    done = registry.results(root.root, list(names), warn=warn, look=look)
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
