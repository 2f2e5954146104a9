"""The data-value engine's files under one artifact root: the basis, the groups, their pools.

Everything the engine reads, it reads here, from plain inputs: an artifact root (local or
``s3://``) and the shard groups whose deduplicated documents exist (the Dagster side knows
them from its ``shards`` partitions and passes them in)::

    root = ExperimentRoot(root="art", groups=("news-0000", "web-0000", "web-0001"))
    root.basis()                      # basis.json: the basis's groups, seq_len, yardsticks
    root.admitted(warn=print)         # the experiments' corpus
    root.kind("web-0001")             # its source: the kind of clean data it is compared with
    pools, dirs = root.variant_pools(spec.variant)

A variant names shard groups, and three kinds of pools that are not groups: ``floor:<group>``
(the group's words shuffled, :func:`pretrain.experiments.pools.build_floor_pool`),
``reserve:<source>`` (the basis's reserve of clean data of that source) and, for a variant with
``filter`` settings, each group re-filtered with them (:func:`ablation_dir`, made by the
``ablation_pools`` asset, :func:`build_ablation_pools`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pretrain import identity, storage
from pretrain.errors import ConfigError, DataError
from pretrain.experiments import registry
from pretrain.experiments.admission import NoiseRisk, noise_from_stats
from pretrain.experiments.basis import RESERVE, TARGETS, held_out_ids
from pretrain.experiments.config import DataVariant
from pretrain.experiments.decisions import read_decisions
from pretrain.experiments.pools import FLOOR_PREFIX, POOL_FILE, PoolInfo, floor_dir, read_pool
from pretrain.experiments.records import Warn, json_object, read_record, strings
from pretrain.experiments.registry import RESERVE_PREFIX

ABLATIONS = "_ablations"
ABLATION_CODE_VERSION = "ablation-v1"


def _basis_record(data: Any) -> dict[str, Any]:
    basis = json_object(data)
    strings(basis["shard_groups"], "shard_groups")
    if not isinstance(basis["seq_len"], int):
        raise TypeError(f"seq_len must be an integer, got {basis['seq_len']!r:.40}")
    return basis


@dataclass(frozen=True)
class ExperimentRoot:
    """The engine's view of one artifact root (see the module docstring)."""

    root: str
    groups: tuple[str, ...] = ()  # shard groups with deduplicated documents

    def uri(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    def has_basis(self) -> bool:
        return identity.read(self.uri("experiment_basis")) is not None

    def basis(self) -> dict[str, Any]:
        """``basis.json`` (its shard groups, ``seq_len``, yardsticks, targets, reserve); a
        ``DataError`` that says to materialize it when the root has none."""
        uri = self.uri("experiment_basis", "basis.json")
        if not self.has_basis() or not storage.exists(uri):
            raise DataError(
                f"no experiment basis under {self.root}: materialize experiment_basis first (the "
                "experiment_basis job; it needs deduped_shards, e.g. from `pretrain data`)"
            )
        return read_record(uri, _basis_record, "an experiment basis")

    def decisions(self, *, warn: Warn | None = None) -> dict[str, str]:
        return read_decisions(self.uri("data_admission"), warn=warn)

    def admitted(self, *, warn: Warn | None = None) -> list[str]:
        """The shard groups in the experiments' corpus (``registry.admitted_groups``); a
        decision file that cannot be read raises, or with ``warn`` is skipped and reported."""
        return registry.admitted_groups(
            list(self.groups), self.basis()["shard_groups"], self.decisions(warn=warn)
        )

    def pools_of(self, group: str) -> list[PoolInfo]:
        """The pools of ``group`` (one per source); a ``DataError`` before they are made."""
        return read_pool(self.uri("proxy_pools", group))

    def sources(self, group: str) -> set[str]:
        """The sources of a group's documents (none before its pools are made)."""
        try:
            return {p.source for p in self.pools_of(group)}
        except DataError:
            return set()

    def kind(self, group: str) -> str | None:
        """The group's source, by tokens: the kind of clean data it is compared with."""
        try:
            tokens = sources_of(self.pools_of(group))
        except DataError:
            return None
        return max(tokens, key=tokens.__getitem__) if tokens else None

    def language(self, group: str) -> str | None:
        """The main language of the group's deduplicated documents (``language`` column)."""
        shares = self.languages(group)
        return max(shares, key=shares.__getitem__) if shares else None

    def languages(self, group: str) -> dict[str, float]:
        """Each language's share of the group's deduplicated documents (``language``)."""
        uri = self.uri("deduped_shards", group, "documents.parquet")
        return language_shares(uri) if storage.exists(uri) else {}

    def noise(self, group: str) -> NoiseRisk | None:
        """What the filter and dedup stages removed from ``group`` (None before they ran)."""
        filter_stats = self.uri("filtered_shards", group, "stats.json")
        dedup_stats = self.uri("deduped_shards", group, "stats.json")
        if not (storage.exists(filter_stats) and storage.exists(dedup_stats)):
            return None
        return noise_from_stats(storage.read_json(filter_stats), storage.read_json(dedup_stats))

    def reserve_kinds(self) -> set[str]:
        """The sources the basis holds a reserve of (a reference arm can be trained for)."""
        return {source for source, tokens in self.basis().get("reserve", {}).items() if tokens}

    def targets_dir(self) -> str | None:
        """The basis's packed target sets (None when it has none)."""
        where = self.uri("experiment_basis", TARGETS)
        return where if storage.exists(storage.join(where, "index.json")) else None

    def held_out(self) -> frozenset[str]:
        return held_out_ids(self.uri("experiment_basis"))

    def check_group(self, group: str) -> None:
        """A ``ConfigError`` unless ``group`` is a shard group with deduplicated documents."""
        if group not in self.groups:
            raise ConfigError(
                f"unknown shard group {group!r}: the groups with deduplicated documents under "
                f"{self.root} are {list(self.groups) or 'none yet (run `pretrain data` first)'}"
            )

    def check_variant(self, variant: DataVariant) -> None:
        """Refuse a variant that names what the root does not hold, before it is registered:
        a shard group without deduplicated documents, a weighted source that no token pool of
        the corpus has (checked once pools exist), a setting ``FilterConfig`` does not have."""
        from pretrain.experiments.ablation import with_overrides
        from pretrain.filters.config import FilterConfig

        with_overrides(FilterConfig(), variant.filter)  # a ConfigError naming the setting
        named = [*variant.include_groups, *variant.exclude_groups, *variant.boost]
        for group in dict.fromkeys(named):
            self.check_group(group)
        if not variant.weights:
            return
        made = [g for g in self.groups if storage.exists(self.uri("proxy_pools", g, POOL_FILE))]
        sources = {p.source for g in made for p in self.pools_of(g)}
        unknown = sorted(set(variant.weights) - sources)
        if sources and unknown:
            raise ConfigError(
                f"weights name sources {unknown} that no token pool under {self.root} has; "
                f"the sources are {sorted(sources)}"
            )

    def variant_pools(self, variant: DataVariant) -> tuple[list[PoolInfo], list[str]]:
        """(pools, the dirs whose identities they come from) of ``variant``: the admitted
        groups, plus and minus its own, each resolved as the module docstring says."""
        groups = registry.variant_groups(self.admitted(), variant)
        pools: list[PoolInfo] = []
        dirs: list[str] = []
        for group in groups:
            found, where = self._resolve(group, variant)
            pools += found
            dirs.append(where)
        return pools, list(dict.fromkeys(dirs))

    def _resolve(self, group: str, variant: DataVariant) -> tuple[list[PoolInfo], str]:
        if group.startswith(RESERVE_PREFIX):
            source = group[len(RESERVE_PREFIX) :]
            basis = self.uri("experiment_basis")
            pools = [
                dataclasses.replace(p, group=group)
                for p in read_pool(storage.join(basis, RESERVE))
                if p.source == source
            ]
            if not pools:
                raise DataError(f"the experiment basis holds no reserve of {source!r}")
            return pools, basis
        if group.startswith(FLOOR_PREFIX):
            owner = group[len(FLOOR_PREFIX) :]
            where = self.uri("proxy_pools", owner)
            self._require(where, f"proxy_pools[{owner}]")
            return read_pool(floor_dir(where)), where
        if variant.filter:
            where = ablation_dir(self.root, variant, group)
            self._require(where, f"ablation_pools[{ablation_key(variant)}]")
        else:
            where = self.uri("proxy_pools", group)
            self._require(where, f"proxy_pools[{group}]")
        return read_pool(where), where

    @staticmethod
    def _require(where: str, what: str) -> None:
        if identity.read(where) is None:
            raise DataError(f"no token pool at {where}: materialize {what} first")


def language_shares(documents_uri: str) -> dict[str, float]:
    """Each language's share of a ``documents.parquet``'s documents (its ``language`` column,
    as the filter stage sets it; documents with none are left out)."""
    counts = storage.read_table(documents_uri, columns=["language"])["language"].value_counts()
    found = {str(r["values"]): int(r["counts"]) for r in counts.to_pylist() if r["values"]}
    total = sum(found.values())
    return {k: n / total for k, n in sorted(found.items())} if total else {}


def ablation_dir(root: str, variant: DataVariant, group: str) -> str:
    """Where the pool of ``group`` re-filtered with ``variant``'s filter settings lies."""
    return storage.join(root, "proxy_pools", ABLATIONS, variant.digest(), group)


def ablation_key(variant: DataVariant) -> str:
    """The ``ablations`` partition of a filter variant: its digest."""
    return f"filt-{variant.digest()}"


ARM_FILE = "arm.json"


@dataclass(frozen=True)
class AblationArm:
    """A filter arm as ``pretrain experiments ablate`` registered it: its ``ablations``
    partition, its settings, the experiments that train on it, and whether its pools are made
    (their identity is there and current)."""

    key: str
    variant: DataVariant
    names: tuple[str, ...]
    ready: bool = False


def _arm_record(data: Any) -> tuple[DataVariant, tuple[str, ...]]:
    record = json_object(data)
    return DataVariant.from_dict(record["variant"]), tuple(strings(record["names"], "names"))


def register_ablation(root: str, variant: DataVariant, names: Sequence[str]) -> str:
    """Record a filter arm for ``ablation_pools[ablation_key(variant)]`` and the experiments
    that train on it; returns its key."""
    where = storage.join(root, "proxy_pools", ABLATIONS, variant.digest(), ARM_FILE)
    storage.write_json({"variant": variant.to_dict(), "names": list(names)}, where)
    return ablation_key(variant)


def ablation_variant(root: ExperimentRoot, key: str) -> tuple[DataVariant, str]:
    """(the variant, its folder) of the arm registered as ``ablations`` partition ``key``."""
    folder = root.uri("proxy_pools", ABLATIONS, key.removeprefix("filt-"))
    where = storage.join(folder, ARM_FILE)
    if not storage.exists(where):
        raise DataError(
            f"no filter arm {key!r} under {root.root}: register it with `pretrain experiments "
            "ablate`"
        )
    return read_record(where, _arm_record, "a filter arm")[0], folder


def ablation_arms(
    root: ExperimentRoot, *, warn: Warn | None = None, look: identity.Look | None = None
) -> list[AblationArm]:
    """Every registered filter arm (a record that cannot be read: skipped, or raised); with a
    ``look``, an arm is ready when its pools were made from the current basis (one level)."""
    from pretrain.experiments.records import read_records

    uris = sorted(storage.list_files(root.uri("proxy_pools", ABLATIONS), (ARM_FILE,)))
    found = read_records(uris, _arm_record, "a filter arm", warn=warn)
    return [
        AblationArm(
            key=ablation_key(variant),
            variant=variant,
            names=names,
            ready=(
                look.is_current(uri.rsplit("/", 1)[0], transitive=False)
                if look
                else identity.is_current(uri.rsplit("/", 1)[0])
            ),
        )  # fmt: skip
        for uri, (variant, names) in found
    ]


def build_ablation_pools(root: ExperimentRoot, variant: DataVariant) -> dict[str, Any]:
    """Each admitted group re-filtered with ``variant``'s filter settings and pooled
    (:func:`pretrain.experiments.ablation.filtered_pool`); a group whose pool is current is
    left as it is. Returns the arm's filter stats per group."""
    from pretrain.experiments.ablation import filtered_pool, with_overrides
    from pretrain.filters.config import FilterConfig

    config = with_overrides(FilterConfig(), variant.filter)
    basis_dir = root.uri("experiment_basis")
    seq_len = root.basis()["seq_len"]
    stats: dict[str, Any] = {}
    for group in registry.variant_groups(root.admitted(), variant):
        out = ablation_dir(root.root, variant, group)
        inputs = [root.uri("raw_shards", group), root.uri("deduped_shards", group), basis_dir]
        ident = identity.compute("ablation_pool", ABLATION_CODE_VERSION, config, inputs)
        built = identity.read(out)
        if built is not None and built.version == ident.version:
            continue
        rejects = root.uri("deduped_shards", group, "rejects.parquet")
        duplicates = (
            frozenset(storage.read_table(rejects, columns=["id"])["id"].to_pylist())
            if storage.exists(rejects)
            else frozenset()
        )
        _, stats[group] = filtered_pool(
            root.uri("raw_shards", group, "documents.parquet"), config,
            tokenizer_uri=storage.join(basis_dir, "tokenizer"), out_dir=out, group=group,
            seq_len=seq_len, exclude_ids=root.held_out(), duplicate_ids=duplicates,
        )  # fmt: skip
        identity.write(out, ident)
    return stats


def sources_of(pools: Sequence[PoolInfo]) -> dict[str, int]:
    """Tokens per source of ``pools``."""
    tokens: dict[str, int] = {}
    for pool in pools:
        tokens[pool.source] = tokens.get(pool.source, 0) + pool.tokens
    return tokens
