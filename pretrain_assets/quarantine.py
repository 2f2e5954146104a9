"""The quarantine (library: :mod:`pretrain.quarantine`; settings ``--quarantine.*``):
``quarantined_documents[decision]`` → ``confirmed_quarantine`` → ``data_mixture``.

- ``quarantined_documents`` (one dynamic partition per rollback decision, added and requested by
  ``quarantine_sensor``): the skip window's documents scored with the checkpoint rolled back to;
  metadata holds the review table (worst documents, PII-masked previews) and the source view.
- ``confirmed_quarantine``: the review log applied to every decision. Materialize it through the
  ``confirmed_quarantine`` job with a review in its config (Launchpad)::

      ops:
        confirmed_quarantine:
          config: {decision_id: b00-s000000041-to-b01, action: confirm, reviewer: ana,
                   reason: "random-token pages", min_score: 1.0}

  The reviewer, action and reason become run tags (``pretrain/review_*``). ``data_mixture``
  depends on it, so the mixture turns stale when the quarantine changes.
"""

import datetime
from typing import Any

from dagster import Config

from foundation.assets import Made, StageRun, stage_asset
from foundation.config import build, config_class, overrides
from foundation.decisions import rollback_decisions, skip_record
from foundation.metadata import finish_output, to_metadata
from foundation.partitions import quarantine_partitions
from pretrain import identity
from pretrain.errors import ConfigError
from pretrain.quarantine import (
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


# No declared deps on packed_tokens / checkpoints: they sit downstream of data_mixture, and an
# asset graph must be acyclic. The loop closes through the sensor; the training run, the
# checkpoint rolled back to and the packed dir are in this asset's metadata instead.
@stage_asset(
    "quarantined_documents",
    stage="quarantine",
    partitions=quarantine_partitions,
    code_version="quarantine-v1",
    group="quarantine",
    resources=("metrics",),
)
def quarantined_documents(run: StageRun) -> Made:
    """The documents of one rollback's skip window with a suspicion score each (pending review)."""
    key = run.partition or ""
    found = rollback_decisions(run.context.instance).get(key)
    if found is None:
        raise ConfigError(
            f"no rollback decision {key!r} in this instance's train runs; partitions are added "
            "by quarantine_sensor for each rollback loss_spike_sensor takes"
        )
    stopped, decision = found
    run_root = run.context.resources.metrics.run_root
    record = skip_record(key, stopped, decision, run_root, run.uri("data_mixture", "train.parquet"))
    out, config = run.uri("quarantined_documents", key), run.library()
    # the decision names the data (window, packed dir, checkpoints); no freshness inputs: the
    # mixture this reads is rebuilt *because* of the quarantine, which must not make it stale
    ident = run.begin(out, {"config": config, "record": record}, [])
    stats = quarantine_decision(record, out, config)
    return run.made(
        out, ident, stats, config, training_run_id=stopped.run_id,
        rolled_back_to=decision.checkpoint_key, scored_after=record.after_checkpoint,
        packed_dir=record.packed_dir,
        review="pending: launch confirmed_quarantine to confirm, release or extend",
    )  # fmt: skip


# One review (ReviewAction's fields, all optional): no decision_id only re-applies the review log
# (e.g. after a new decision was quarantined).
QuarantineReviewConfig = config_class(ReviewAction, optional=True, name="QuarantineReviewConfig")


def review_action(config: Config) -> ReviewAction | None:
    """The review in the launch config, or None (no decision_id: re-apply the review log)."""
    chosen = overrides(config)
    if not chosen.get("decision_id"):
        return None
    try:
        return build(ReviewAction, chosen)
    except ConfigError as exc:
        raise ConfigError(
            f"confirmed_quarantine launch config (ops: confirmed_quarantine: config:): {exc}"
        ) from exc


CONFIRMED_CODE_VERSION = "confirmed-v1"


@stage_asset(
    "confirmed_quarantine",
    deps=["quarantined_documents"],
    code_version=CONFIRMED_CODE_VERSION,
    group="quarantine",
    launch_config=QuarantineReviewConfig,
)
def confirmed_quarantine(run: StageRun) -> Made:
    """The documents the mixture excludes: every decision with its operator reviews applied."""
    decisions = read_decision_documents(run.uri("quarantined_documents"))
    reviews_root = run.uri("quarantine_reviews")
    action = review_action(run.launch)
    if action is not None:
        _record(run, action, decisions, reviews_root)
    confirmed, status = resolve_confirmed(decisions, read_reviews(reviews_root))
    out = run.uri("confirmed_quarantine")
    fingerprint = write_confirmed(confirmed, status, out)
    # named by what the mixture excludes: a review that changes nothing keeps data_mixture fresh
    ident = identity.compute("confirmed_quarantine", CONFIRMED_CODE_VERSION,
                             {"confirmed": fingerprint}, inputs=[])  # fmt: skip
    shares = mixture_token_shares(run.uri("packed_tokens"))
    every = source_view(decisions, shares) if decisions is not None else []
    return Made(
        data_version=finish_output(out, ident),  # data_mixture turns stale only when this changes
        metadata=to_metadata({
            "confirmed_documents": confirmed.num_rows,
            "confirmed_tokens": sum(confirmed["tokens"].to_pylist()),
            "decisions": status,
            "pending_decisions": [d for d, s in status.items() if s["status"] == "pending"],
            "quarantined_source_view_md": source_view_md(every),
            "confirmed_source_view_md": source_view_md(source_view(confirmed, shares)),
            "uri": out,
            "identity": ident.version,
        }),
    )  # fmt: skip


def _record(run: StageRun, action: ReviewAction, decisions: Any, reviews_root: str) -> None:
    """The operator's review: appended to the review log, and as the run's tags."""
    known = set(decisions["decision_id"].to_pylist()) if decisions is not None else set()
    at = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    record_review(action, reviews_root, run_id=run.context.run.run_id, at=at, known=known)
    run.context.instance.add_run_tags(run.context.run.run_id, {
        "pretrain/review_decision": action.decision_id,
        "pretrain/review_action": action.action,
        "pretrain/reviewer": action.reviewer,
        "pretrain/review_reason": action.reason[:200],
    })  # fmt: skip
