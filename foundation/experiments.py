"""Experiments on the Dagster side: what only the instance knows, handed to the library.

The data-value engine is a library over an artifact root (:mod:`pretrain.experiments.corpus`,
:mod:`pretrain.experiments.evidence`, :mod:`pretrain.experiments.workflow`). What it needs from
Dagster is two facts: which shard groups exist (the ``shards`` partitions, kept when their
deduplicated documents are complete) and what the cleaning stages' CPU time was (their
materializations' metadata)::

    root = experiment_root(instance, store)        # ExperimentRoot(root, groups)
    cpu = cleaning_cpu_seconds(instance, "web-0007")

Registering and launching experiments is :mod:`foundation.experiment_launches`.
"""

from __future__ import annotations

from dagster import AssetKey, AssetRecordsFilter, DagsterInstance

from foundation.instance_index import dynamic_partitions, materialized_partitions
from foundation.partitions import SHARD_PARTITIONS_NAME
from pretrain.experiments.corpus import ExperimentRoot
from resources.storage import ArtifactStore

# the stages whose CPU time is a group's cleaning cost
CLEANING_STAGES = ("raw_shards", "filtered_shards", "minhash_signatures", "deduped_shards")


def corpus_groups(instance: DagsterInstance) -> list[str]:
    """Shard groups whose deduplicated documents exist: those with a ``deduped_shards``
    materialization (recorded once the output is complete, after its identity), from the
    instance's asset index (the store is not read), read incrementally in a process that asks
    tick after tick (:mod:`foundation.instance_index`)."""
    shards = set(dynamic_partitions(instance, SHARD_PARTITIONS_NAME))
    return sorted(shards & materialized_partitions(instance, "deduped_shards"))


def experiment_root(instance: DagsterInstance, store: ArtifactStore) -> ExperimentRoot:
    """The engine's view of the store: its root and the corpus's shard groups."""
    return ExperimentRoot(root=store.root, groups=tuple(corpus_groups(instance)))


def cleaning_cpu_seconds(instance: DagsterInstance, group: str) -> float | None:
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
