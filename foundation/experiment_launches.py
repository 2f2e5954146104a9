"""Registering and launching experiments, and the records of launched searches.

- :func:`register_experiments` writes the specs and adds the ``experiments`` partitions;
- :func:`not_run`: which of them have no result that counts yet (``registry.results``: complete
  and current);
- :func:`launch_search` registers a search's candidates and launches them as one backfill of
  ``proxy_runs`` (the ``launch_search`` job and ``pretrain experiments search``);
  :func:`record_search` keeps its settings in ``mixture_search/launched/<search id>.json``, which
  ``experiment_sensor`` reads back (:func:`launched_searches`) to run the rest and fit it.

A launch record is read through :func:`pretrain.experiments.records.read_record`: one that is
not a record (not JSON, a setting of the wrong type) is skipped with a warning naming it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from dagster import AssetKey, DagsterInstance

from foundation.backfills import launch_asset_backfill
from foundation.config import build
from foundation.experiments import experiment_root
from foundation.partitions import EXPERIMENT_PARTITIONS_NAME, experiment_partitions
from pretrain import storage
from pretrain.experiments import registry
from pretrain.experiments.config import ExperimentSpec
from pretrain.experiments.evidence import (
    search_candidates,
    search_fit,
    search_skipped,
    verification_specs,
)
from pretrain.experiments.records import Warn, json_object, read_records, strings
from pretrain.experiments.search import SearchConfig
from resources.storage import ArtifactStore

SEARCH_TAG = "pretrain/search"


def register_experiments(
    instance: DagsterInstance, store: ArtifactStore, specs: Sequence[ExperimentSpec]
) -> list[str]:
    """Write each spec and add its ``experiments`` partition; returns the names (in order)."""
    for spec in specs:
        registry.register(store.root, spec)
    names = [s.name for s in specs]
    known = set(instance.get_dynamic_partitions(EXPERIMENT_PARTITIONS_NAME))
    new = [n for n in dict.fromkeys(names) if n not in known]
    if new:
        instance.add_dynamic_partitions(EXPERIMENT_PARTITIONS_NAME, new)
    return names


def not_run(store: ArtifactStore, names: Sequence[str], *, warn: Warn | None = None) -> list[str]:
    """The experiments among ``names`` with no result that counts yet (none, interrupted, or
    made from inputs that changed since: ``registry.results``)."""
    done = registry.results(store.root, names, warn=warn)
    return [n for n in dict.fromkeys(names) if n not in done]


def launch_search(
    instance: DagsterInstance, store: ArtifactStore, config: SearchConfig, *, launch: bool = True
) -> dict[str, Any]:
    """Register a search's candidates and launch the ones not run yet as one backfill of
    ``proxy_runs`` (``mixture_search`` fits them once it is done). With an anneal recipe the
    backfill holds the proxies the candidates continue when those have not run; then
    ``experiment_sensor`` asks for the candidates once they have. ``launch=False`` registers
    only (``backfill_id`` None). A search that cannot run launches nothing: ``skipped`` says
    why."""
    root = experiment_root(instance, store)
    skipped = search_skipped(root, config)
    if skipped:
        return {"search_id": config.search_id(), "skipped": skipped, "experiments": 0,
                "to_run": 0, "backfill_id": None, "names": [], "starts": [],
                "candidates_launched": False}  # fmt: skip
    _, _, specs = search_candidates(root, config)
    names = register_experiments(instance, store, specs)
    starts = register_experiments(instance, store, registry.starts_of(config.recipe, config.seeds))
    waiting = not_run(store, starts)  # an anneal recipe's: they run first, the candidates after
    candidates_todo = not_run(store, names)
    todo = waiting or candidates_todo
    backfill_id = None
    if todo and launch:
        backfill_id = launch_asset_backfill(
            instance, AssetKey("proxy_runs"), experiment_partitions, todo,
            tags={SEARCH_TAG: config.search_id()},
            title=config.search_id() + (": start proxies" if waiting else ""),
        )  # fmt: skip
    return {
        "search_id": config.search_id(),
        "experiments": len(names),
        "to_run": len(candidates_todo),
        "backfill_id": backfill_id,
        "names": names,
        "starts": starts,
        "candidates_launched": not waiting,
    }


def record_search(store: ArtifactStore, config: SearchConfig, launched: dict[str, Any]) -> str:
    """Keep a launched search's settings, so the sensor fits it with the same ones."""
    uri = store.uri("mixture_search", "launched", f"{config.search_id()}.json")
    storage.write_json({"config": dataclasses.asdict(config), **launched}, uri)
    return uri


def verification_of(
    instance: DagsterInstance, store: ArtifactStore, config: SearchConfig, record: dict[str, Any]
) -> list[str]:
    """The names of a launched search's verification proxies, once its candidates have run:
    fitted and registered the first time, then kept in the launch record."""
    if "verification" not in record:
        report, _, _ = search_fit(experiment_root(instance, store), config)
        specs = verification_specs(config, report)
        for spec in specs:
            registry.register(store.root, spec)
        record = {**record, "verification": [s.name for s in specs]}
        record_search(store, config, record)
    return list(record["verification"])


def search_record(data: Any) -> tuple[SearchConfig, dict[str, Any]]:
    """A launch record as :func:`record_search` writes it, checked: its settings make a
    ``SearchConfig``, its lists of experiment names are lists of names."""
    record = json_object(data)
    config = build(SearchConfig, json_object(record["config"]))
    for key in ("names", "starts", "verification"):
        if key in record:
            strings(record[key], key)
    if not isinstance(record.get("candidates_launched", True), bool):
        raise TypeError(
            f"candidates_launched must be true or false: {record['candidates_launched']!r:.40}"
        )
    return config, record


def launched_searches(
    store: ArtifactStore, *, warn: Warn | None = None
) -> list[tuple[SearchConfig, dict[str, Any]]]:
    """Every search launched so far, oldest first, with its settings; a record that cannot be
    read raises, or with ``warn`` is skipped and reported."""
    uris = sorted(storage.list_files(store.uri("mixture_search", "launched"), (".json",)))
    return [
        found for _, found in read_records(uris, search_record, "a search launch record", warn=warn)
    ]
