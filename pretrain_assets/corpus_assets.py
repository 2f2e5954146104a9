"""Corpus assets: ``data_mixture`` → ``tokenizer`` → ``packed_tokens``."""

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dagster import (
    AllPartitionMapping,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    MaterializeResult,
    asset,
)

from jobs.config import to_library
from jobs.partitions import SHARD_PARTITIONS_NAME
from jobs.stages import STAGES
from pretrain import storage, verify
from pretrain.experiments.decisions import excluded_groups, read_decisions
from pretrain.experiments.search import proposed_weights, search_skip_reason
from pretrain.mixture import MixtureConfig, build_mixture, documents_per_source
from pretrain.packing import PackingConfig, pack_tokens
from pretrain.quarantine import exclusion_reasons, read_confirmed
from pretrain.tokenizer import TokenizerConfig, train_tokenizer
from pretrain_assets.dedup_assets import deduped_shards
from pretrain_assets.metadata import begin_output, check_result, finish_output, stage_metadata
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    MixtureRunConfig = Any
else:
    MixtureRunConfig = STAGES["mixture"].config_class


@asset(
    deps=[
        deduped_shards,
        "confirmed_quarantine",
        "mixture_search",
        AssetDep("data_admission", partition_mapping=AllPartitionMapping()),
    ],
    group_name="corpus",
    code_version="mixture-v4",  # v4: provenance columns kept; the confirmed quarantine left out
    check_specs=[
        AssetCheckSpec("train_non_empty", asset="data_mixture"),
        AssetCheckSpec("validation_disjoint_from_train", asset="data_mixture"),
        AssetCheckSpec(
            "train_decontaminated",
            asset="data_mixture",
            description="no training document shares a 13-gram with a configured eval file",
        ),
    ],
)
def data_mixture(
    context: AssetExecutionContext, config: MixtureRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Per-source weighted training mixture and a per-source validation split, without the
    documents of the confirmed quarantine (and, by default, their duplicate clusters)."""
    library_config = to_library(config, MixtureConfig)
    # shard groups admission rejected (or held, unless include_held_groups) stay out
    decisions = read_decisions(store.uri("data_admission"))
    left_out = excluded_groups(decisions, include_held=library_config.include_held_groups)
    shards = [
        s for s in context.instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME)
        if s not in left_out
    ]  # fmt: skip
    document_uris = [store.uri("deduped_shards", s, "documents.parquet") for s in shards]
    out = store.uri("data_mixture")
    searched: list[str] = []
    skipped = None
    if library_config.weights_from == "searched":
        skipped = search_skip_reason(documents_per_source(document_uris))
        if skipped:  # e.g. one source: no search to take weights from, and none needed
            context.log.warning(
                f"mixture search skipped: {skipped}; weights_from='searched' falls back to the "
                "configured weights (none set: each source's natural share)"
            )
        else:
            searched = [store.uri("mixture_search")]
        weights = proposed_weights(searched[0]) if searched else library_config.weights
        library_config = replace(library_config, weights=weights, weights_from="config")
    confirmed = read_confirmed(store.uri("confirmed_quarantine"))
    clusters = store.uri("dedup_clusters", "clusters.parquet")
    exclude = None
    if confirmed is not None:
        exclude = exclusion_reasons(
            confirmed, clusters if library_config.quarantine_duplicates else None
        )
    inputs = [store.uri("deduped_shards", s) for s in shards] + searched
    settings = {
        "config": library_config,
        "excluded": sorted((exclude or {}).items()),
        "groups_left_out": left_out,
    }
    ident = begin_output(context, store, out, settings, inputs)
    stats = build_mixture(document_uris, out, library_config, exclude=exclude)
    train, val = storage.join(out, "train.parquet"), storage.join(out, "val.parquet")
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(
            stats,
            library_config,
            ident,
            uri=out,
            shards=len(shards),
            groups_left_out=left_out,
            weights_from="searched" if searched else "config",
            **({"search_skipped": skipped} if skipped else {}),
        ),  # fmt: skip
        check_results=[
            check_result("train_non_empty", verify.non_empty(train)),
            check_result("validation_disjoint_from_train", verify.splits_disjoint(train, val)),
            check_result(
                "train_decontaminated",
                verify.train_decontaminated(train, library_config.decontam),
            ),
        ],
    )


if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    TokenizerRunConfig = Any
else:
    TokenizerRunConfig = STAGES["tokenizer"].config_class


@asset(
    deps=[data_mixture],
    group_name="corpus",
    code_version="tokenizer-v2",
    check_specs=[AssetCheckSpec("exact_round_trip", asset="tokenizer")],
)
def tokenizer(
    context: AssetExecutionContext, config: TokenizerRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Byte-level BPE trained on the mixture's training split."""
    out = store.uri("tokenizer")
    library_config = to_library(config, TokenizerConfig)
    ident = begin_output(context, store, out, library_config, [store.uri("data_mixture")])
    stats = train_tokenizer(store.uri("data_mixture", "train.parquet"), out, library_config)
    outcome = verify.tokenizer_round_trip(
        storage.join(out, "tokenizer.json"), store.uri("data_mixture", "val.parquet")
    )
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out),
        check_results=[check_result("exact_round_trip", outcome)],
    )


if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    PackingRunConfig = Any
else:
    PackingRunConfig = STAGES["packing"].config_class


@asset(
    deps=[data_mixture, tokenizer],
    group_name="corpus",
    code_version="packing-v3",  # v3: ledger.source_id
    check_specs=[
        AssetCheckSpec("ledger_tokens_equal_shard_tokens", asset="packed_tokens"),
        AssetCheckSpec("validation_disjoint_from_train", asset="packed_tokens"),
    ],
)
def packed_tokens(
    context: AssetExecutionContext, config: PackingRunConfig, store: ArtifactStore
) -> MaterializeResult:
    """Fixed-length token sequences (train shuffled, validation per source) plus a ledger."""
    out = store.uri("packed_tokens")
    library_config = to_library(config, PackingConfig)
    inputs = [store.uri("data_mixture"), store.uri("tokenizer")]
    ident = begin_output(context, store, out, library_config, inputs)
    stats = pack_tokens(
        store.uri("data_mixture"), store.uri("tokenizer", "tokenizer.json"), out, library_config
    )
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(stats, library_config, ident, uri=out),
        check_results=[
            check_result("ledger_tokens_equal_shard_tokens", verify.ledger_matches_tokens(out)),
            check_result(
                "validation_disjoint_from_train",
                verify.ledger_excludes_validation(out, store.uri("data_mixture", "val.parquet")),
            ),
        ],
    )
