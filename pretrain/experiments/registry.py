"""Where experiments live under the artifact root, and the specs that make them.

    register(root, spec)               # experiment_specs/<name>.json (idempotent)
    load_spec(root, "mix-0a1b2c3d-s0")
    list_specs(root, warn=log.warning) # every registered experiment (a bad file: skipped, said)
    results(root, names)               # the results that count: complete and current

An experiment is registered before its ``proxy_runs`` partition runs: the partition key is its
name, and the spec says what to train. Registering the same spec twice is a no-op; the same name
with other settings is refused. Every spec and result is read through
:func:`pretrain.experiments.records.read_record`: a file that is not one is a ``DataError``
naming it. The functions that make specs for one purpose are here too:
:func:`admission_specs` (a shard group with and without, against its floor and a reference of
clean data of its kind, several seeds; :func:`starts_of`, the
proxies an anneal recipe continues), :func:`search_specs`
(mixture candidates) and :func:`ablation_specs` (filter settings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pretrain import identity, storage
from pretrain.errors import ConfigError, DataError
from pretrain.experiments.config import (
    DataVariant,
    ExperimentSpec,
    experiment_name,
    get_proxy_recipe,
)
from pretrain.experiments.pools import FLOOR_PREFIX
from pretrain.experiments.records import Warn, read_record, read_records
from pretrain.experiments.run import ExperimentResult, read_result

SPECS = "experiment_specs"
RUNS = "proxy_runs"


def spec_uri(root: str, name: str) -> str:
    return storage.join(root, SPECS, f"{name}.json")


def result_dir(root: str, name: str) -> str:
    return storage.join(root, RUNS, name)


def register(root: str, spec: ExperimentSpec) -> bool:
    """Record ``spec``; returns False when it was already registered with the same settings."""
    uri = spec_uri(root, spec.name)
    if storage.exists(uri):
        known = read_spec(uri)
        if known.settings() != spec.settings():
            raise ConfigError(
                f"experiment {spec.name!r} is registered with other settings; choose another name"
            )
        return False
    storage.write_bytes(spec.to_json().encode(), uri)
    return True


def load_spec(root: str, name: str) -> ExperimentSpec:
    uri = spec_uri(root, name)
    if not storage.exists(uri):
        raise DataError(
            f"no experiment {name!r} ({uri}); register it first (pretrain experiments add, a "
            "mixture search, an admission or an ablation)"
        )
    return read_spec(uri)


def read_spec(uri: str) -> ExperimentSpec:
    """The spec in ``uri``; a ``DataError`` naming it when it is not one."""
    return read_record(uri, ExperimentSpec.from_dict, "an experiment spec")


def list_specs(root: str, *, warn: Warn | None = None) -> list[ExperimentSpec]:
    """Every registered spec, by name. A file that is not a spec raises (``warn`` None) or is
    skipped and reported through ``warn``."""
    uris = storage.list_files(storage.join(root, SPECS), (".json",))
    found = read_records(uris, ExperimentSpec.from_dict, "an experiment spec", warn=warn)
    return sorted((spec for _, spec in found), key=lambda s: s.name)


def results(
    root: str,
    names: Sequence[str],
    *,
    warn: Warn | None = None,
    look: identity.Look | None = None,
) -> dict[str, ExperimentResult]:
    """The results that count for ``names``: those whose output is complete and current (its
    identity, written after ``result.json``, is there and none of the inputs it records changed
    since). A name not run yet, a run that was interrupted or is being redone, and one made from
    inputs that changed since are absent. An unreadable ``result.json`` raises (``warn`` None)
    or is skipped and reported through ``warn``. With a ``look`` (a sensor's), an input counts
    as current when it was not remade since the look before (one level, not transitively)."""
    found = {}
    for name in names:
        where = result_dir(root, name)
        current = look.is_current(where, transitive=False) if look else identity.is_current(where)
        if not current:
            continue
        try:
            result = read_result(where)
        except DataError as exc:
            if warn is None:
                raise
            warn(f"{exc} (skipped)")
            continue
        if result is not None:
            found[name] = result
    return found


def admitted_groups(
    groups: Sequence[str], basis_groups: Sequence[str], decisions: Mapping[str, str]
) -> list[str]:
    """The shard groups in the corpus: admitted ones, and the basis's own groups unless a
    decision says otherwise. A new group without a decision is not in the experiments' corpus."""
    return sorted(
        g
        for g in groups
        if decisions.get(g) == "admit" or (g in basis_groups and decisions.get(g) is None)
    )


def variant_groups(admitted: Sequence[str], variant: DataVariant) -> list[str]:
    return sorted((set(admitted) | set(variant.include_groups)) - set(variant.exclude_groups))


def start_spec(recipe: str, seed: int) -> ExperimentSpec | None:
    """The proxy an anneal recipe continues: its base recipe trained from scratch on the
    admitted corpus (natural weights) with ``seed`` (``None`` for a recipe trained from
    scratch itself). Every admission and search with that recipe and seed shares it."""
    starts_from = get_proxy_recipe(recipe).starts_from
    if starts_from is None:
        return None
    variant = DataVariant()
    return ExperimentSpec(
        name=experiment_name("start", variant, seed, starts_from), variant=variant,
        recipe=starts_from, seed=seed, kind="start", label="start",
    )  # fmt: skip


RESERVE_PREFIX = "reserve:"  # a variant's pseudo-group: the basis's reserve of one source


class AdmissionArms(NamedTuple):
    """The proxies an admission compares, one per seed each: the corpus with the group, the
    corpus alone, with the group's floor (its words shuffled) and with the reserve of clean
    data of its kind (none when the basis holds no reserve of that source)."""

    with_: list[ExperimentSpec]
    without: list[ExperimentSpec]
    floor: list[ExperimentSpec]
    reference: list[ExperimentSpec]

    def all(self) -> list[ExperimentSpec]:
        return [*self.with_, *self.without, *self.floor, *self.reference]


def admission_specs(
    group: str,
    *,
    recipe: str,
    seeds: Sequence[int],
    probe_share: float,
    kind: str | None = None,
) -> AdmissionArms:
    """The arms of ``group``'s admission (:class:`AdmissionArms`), each at ``probe_share`` of
    the same budget. The without arm names no group and the reference arm only ``kind`` (the
    source whose reserve it reads), so every group decided against the same corpus shares the
    first, and every group of that source the second. With an anneal recipe every arm of a
    seed continues the same proxy (:func:`start_spec`), so they differ by their data alone;
    :func:`starts_of` lists the proxies to run first."""

    def probe(pseudo: str) -> DataVariant:
        return DataVariant(include_groups=(pseudo,), boost={pseudo: probe_share})

    def make(variant: DataVariant, label: str, seed: int, owner: str) -> ExperimentSpec:
        start = start_spec(recipe, seed)
        return ExperimentSpec(
            name=experiment_name(f"admit-{label}", variant, seed, recipe), variant=variant,
            recipe=recipe, seed=seed, kind="admission", group=owner, label=label,
            base=start.name if start else "",
        )  # fmt: skip

    reference = [] if kind is None else [
        make(probe(RESERVE_PREFIX + kind), "reference", s, RESERVE_PREFIX + kind) for s in seeds
    ]  # fmt: skip
    return AdmissionArms(
        with_=[make(probe(group), "with", s, group) for s in seeds],
        without=[make(DataVariant(), "base", s, "") for s in seeds],
        floor=[make(probe(FLOOR_PREFIX + group), "floor", s, group) for s in seeds],
        reference=reference,
    )


def starts_of(recipe: str, seeds: Sequence[int]) -> list[ExperimentSpec]:
    """The from-scratch proxies an admission with ``recipe`` continues (none for a recipe
    trained from scratch)."""
    return [s for s in (start_spec(recipe, seed) for seed in seeds) if s is not None]


def search_specs(
    search_id: str,
    candidates: Sequence[dict[str, float]],
    *,
    recipe: str,
    seeds: Sequence[int],
    labels: Sequence[str] | None = None,
) -> list[ExperimentSpec]:
    """One proxy per candidate and seed (``labels``: the candidates' names, default
    ``c000``…); with an anneal recipe each continues the proxy of its seed
    (:func:`starts_of`), so candidates differ by their mixture alone."""
    starts = {s: start_spec(recipe, s) for s in seeds}
    labels = list(labels or [f"c{i:03d}" for i in range(len(candidates))])
    return [
        ExperimentSpec(
            name=experiment_name("mix", DataVariant(weights=w), s, recipe),
            variant=DataVariant(weights=w),
            recipe=recipe,
            seed=s,
            kind="search",
            group=search_id,
            label=label,
            base=start.name if (start := starts[s]) else "",
        )  # fmt: skip
        for label, w in zip(labels, candidates, strict=True)
        for s in seeds
    ]


def ablation_specs(
    ablation: str, settings: Sequence[Mapping[str, Any]], *, recipe: str, seeds: Sequence[int]
) -> list[ExperimentSpec]:
    """One arm per filter setting (``{}`` is the campaign's own filter), one spec per seed."""
    specs = []
    for arm, overrides in enumerate(settings):
        variant = DataVariant(filter=dict(overrides))
        for s in seeds:
            specs.append(
                ExperimentSpec(
                    name=experiment_name("filt", variant, s, recipe),
                    variant=variant,
                    recipe=recipe,
                    seed=s,
                    kind="ablation",
                    group=ablation,
                    label=f"arm{arm}",
                )  # fmt: skip
            )
    return specs
