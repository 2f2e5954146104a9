"""``data_mixture``: the training mixture and its validation split (library:
:mod:`pretrain.mixture`; settings ``--mixture.*``, ``MixtureConfig``): per-source weights (the
configured ones, or a mixture search's proposal), without the shard groups admission left out
and without the documents of the confirmed quarantine (and, by default, their duplicates)."""

from dataclasses import replace
from typing import Any

from dagster import AllPartitionMapping, AssetDep

from foundation.assets import ERROR, Check, Made, StageRun, stage_asset
from foundation.partitions import SHARD_PARTITIONS_NAME
from pretrain import verify
from pretrain.experiments.decisions import excluded_groups, read_decisions
from pretrain.experiments.search import proposed_weights, search_skip_reason
from pretrain.mixture import build_mixture, documents_per_source
from pretrain.quarantine import exclusion_reasons, read_confirmed


@stage_asset(
    "data_mixture",
    stage="mixture",
    deps=[
        "deduped_shards",
        "confirmed_quarantine",
        "mixture_search",
        AssetDep("data_admission", partition_mapping=AllPartitionMapping()),
    ],  # fmt: skip
    code_version="mixture-v5",  # v5: a source of 2+ documents keeps one to train on
    group="corpus",
    checks={
        "train_non_empty": ERROR,
        "validation_disjoint_from_train": ERROR,
        "train_decontaminated": Check(
            description="no training document shares a 13-gram with a configured eval file"
        ),
    },
)
def data_mixture(run: StageRun) -> Made:
    """Per-source weighted training mixture and a per-source validation split, without the
    documents of the confirmed quarantine (and, by default, their duplicate clusters)."""
    config = run.library()
    # shard groups admission rejected (or held, unless include_held_groups) stay out
    left_out = excluded_groups(read_decisions(run.uri("data_admission")),
                               include_held=config.include_held_groups)  # fmt: skip
    shards = [s for s in run.context.instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME)
              if s not in left_out]  # fmt: skip
    documents = [run.uri("deduped_shards", s, "documents.parquet") for s in shards]
    config, searched, skipped = _weights(run, config, documents)
    confirmed = read_confirmed(run.uri("confirmed_quarantine"))
    clusters = (
        run.uri("dedup_clusters", "clusters.parquet") if config.quarantine_duplicates else None
    )
    exclude = exclusion_reasons(confirmed, clusters) if confirmed is not None else None
    out = run.uri("data_mixture")
    settings = {"config": config, "excluded": sorted((exclude or {}).items()),
                "groups_left_out": left_out}  # fmt: skip
    ident = run.begin(out, settings, [run.uri("deduped_shards", s) for s in shards] + searched)
    stats = build_mixture(documents, out, config, exclude=exclude)
    train, val = run.uri("data_mixture", "train.parquet"), run.uri("data_mixture", "val.parquet")
    return run.made(
        out, ident, stats, config, shards=len(shards), groups_left_out=left_out,
        weights_from="searched" if searched else "config",
        **({"search_skipped": skipped} if skipped else {}),
        checks={
            "train_non_empty": verify.non_empty(train),
            "validation_disjoint_from_train": verify.splits_disjoint(train, val),
            "train_decontaminated": verify.train_decontaminated(train, config.decontam),
        },
    )  # fmt: skip


def _weights(run: StageRun, config: Any, documents: list[str]) -> tuple[Any, list[str], str | None]:
    """(the config with the weights it trains on, the search it took them from, why no search
    could be taken: e.g. one source, where there is nothing to decide)."""
    if config.weights_from != "searched":
        return config, [], None
    skipped = search_skip_reason(documents_per_source(documents))
    if skipped:
        run.context.log.warning(
            f"mixture search skipped: {skipped}; weights_from='searched' falls back to the "
            "configured weights (none set: each source's natural share)"
        )
    searched = [] if skipped else [run.uri("mixture_search")]
    weights = proposed_weights(searched[0]) if searched else config.weights
    return replace(config, weights=weights, weights_from="config"), searched, skipped
