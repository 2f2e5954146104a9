"""Quarantine assets: ``quarantined_documents[decision]`` → ``confirmed_quarantine`` → ``data_mixture``.

- ``quarantined_documents`` (one dynamic partition per rollback decision, added and requested by
  ``quarantine_sensor``): the skip window's documents scored with the checkpoint rolled back to;
  metadata holds the review table (worst documents, PII-masked previews) and the source view.
- ``confirmed_quarantine``: the review log applied to every decision. Materialize it through the
  ``review_quarantine`` job with a review in its config (Launchpad)::

      ops:
        confirmed_quarantine:
          config: {decision_id: b00-s000000041-to-b01, action: confirm, reviewer: ana,
                   reason: "random-token pages", min_score: 1.0}

  The reviewer, action and reason become run tags (``pretrain/review_*``). ``data_mixture``
  depends on it, so the mixture turns stale when the quarantine changes.
"""

import datetime
from typing import TYPE_CHECKING, Any

from dagster import AssetExecutionContext, Config, MaterializeResult, asset

from jobs.config import build, config_class, overrides, to_library
from jobs.partitions import quarantine_partitions
from jobs.quarantine import rollback_decisions, skip_record
from jobs.stages import STAGES
from pretrain import identity
from pretrain.errors import ConfigError
from pretrain.quarantine import (
    QuarantineConfig,
    ReviewAction,
    mixture_token_shares,
    quarantine_decision,
    read_decision_documents,
    read_reviews,
    record_review,
    resolve_confirmed,
    source_view,
    source_view_md,
    write_confirmed,
)
from pretrain_assets.metadata import begin_output, finish_output, stage_metadata, to_metadata
from resources.metrics import WandbMetricsReader
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    QuarantineRunConfig = Any
else:
    QuarantineRunConfig = STAGES["quarantine"].config_class


# No declared deps on packed_tokens / checkpoints: they sit downstream of data_mixture, and an
# asset graph must be acyclic. The loop closes through the sensor; the training run, the
# checkpoint rolled back to and the packed dir are in this asset's metadata instead.
@asset(
    partitions_def=quarantine_partitions,
    group_name="quarantine",
    code_version="quarantine-v1",
)
def quarantined_documents(
    context: AssetExecutionContext,
    config: QuarantineRunConfig,
    store: ArtifactStore,
    metrics: WandbMetricsReader,
) -> MaterializeResult:
    """The documents of one rollback's skip window with a suspicion score each (pending review)."""
    key = context.partition_key
    found = rollback_decisions(context.instance).get(key)
    if found is None:
        raise ConfigError(
            f"no rollback decision {key!r} in this instance's train runs; partitions are added "
            "by quarantine_sensor for each rollback loss_spike_sensor takes"
        )
    run, decision = found
    record = skip_record(
        key, run, decision, metrics.run_root, store.uri("data_mixture", "train.parquet")
    )
    library_config = to_library(config, QuarantineConfig)
    out = store.uri("quarantined_documents", key)
    # the decision names the data (window, packed dir, checkpoints); no freshness inputs: the
    # mixture this reads is rebuilt *because* of the quarantine, which must not make it stale
    ident = begin_output(context, store, out, {"config": library_config, "record": record}, [])
    stats = quarantine_decision(record, out, library_config)
    return MaterializeResult(
        data_version=finish_output(out, ident),
        metadata=stage_metadata(
            stats,
            library_config,
            ident,
            training_run_id=run.run_id,
            rolled_back_to=decision.checkpoint_key,
            scored_after=record.after_checkpoint,
            packed_dir=record.packed_dir,
            review="pending: launch review_quarantine to confirm, release or extend",
        ),
    )


# One review (ReviewAction's fields, all optional): no decision_id only re-applies the review log
# (e.g. after a new decision was quarantined).
if TYPE_CHECKING:  # classes generated from library dataclasses (jobs.config): Any to mypy
    QuarantineReviewConfig = Any
else:
    QuarantineReviewConfig = config_class(
        ReviewAction, optional=True, name="QuarantineReviewConfig"
    )


def review_action(config: Config) -> ReviewAction | None:
    """The review in the launch config, or None (no decision_id: re-apply the review log)."""
    chosen = overrides(config)
    if not chosen.get("decision_id"):
        return None
    try:
        return build(ReviewAction, chosen)
    except ConfigError as exc:
        raise ConfigError(
            f"review_quarantine launch config (ops: confirmed_quarantine: config:): {exc}"
        ) from exc


CONFIRMED_CODE_VERSION = "confirmed-v1"


@asset(deps=[quarantined_documents], group_name="quarantine", code_version=CONFIRMED_CODE_VERSION)
def confirmed_quarantine(
    context: AssetExecutionContext, config: QuarantineReviewConfig, store: ArtifactStore
) -> MaterializeResult:
    """The documents the mixture excludes: every decision with its operator reviews applied."""
    decisions = read_decision_documents(store.uri("quarantined_documents"))
    reviews_root = store.uri("quarantine_reviews")
    action = review_action(config)
    if action is not None:
        known = set(decisions["decision_id"].to_pylist()) if decisions is not None else set()
        at = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        record_review(action, reviews_root, run_id=context.run.run_id, at=at, known=known)
        context.instance.add_run_tags(
            context.run.run_id,
            {
                "pretrain/review_decision": action.decision_id,
                "pretrain/review_action": action.action,
                "pretrain/reviewer": action.reviewer,
                "pretrain/review_reason": action.reason[:200],
            },
        )
    confirmed, status = resolve_confirmed(decisions, read_reviews(reviews_root))
    out = store.uri("confirmed_quarantine")
    fingerprint = write_confirmed(confirmed, status, out)
    # named by what the mixture excludes: a review that changes nothing keeps data_mixture fresh
    ident = identity.compute(
        "confirmed_quarantine", CONFIRMED_CODE_VERSION, {"confirmed": fingerprint}, inputs=[]
    )
    shares = mixture_token_shares(store.uri("packed_tokens"))
    every = source_view(decisions, shares) if decisions is not None else []
    return MaterializeResult(
        data_version=finish_output(out, ident),  # data_mixture turns stale only when this changes
        metadata=to_metadata(
            {
                "confirmed_documents": confirmed.num_rows,
                "confirmed_tokens": sum(confirmed["tokens"].to_pylist()),
                "decisions": status,
                "pending_decisions": [d for d, s in status.items() if s["status"] == "pending"],
                "quarantined_source_view_md": source_view_md(every),
                "confirmed_source_view_md": source_view_md(source_view(confirmed, shares)),
                "uri": out,
                "identity": ident.version,
            }
        ),
    )
