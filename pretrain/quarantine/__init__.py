"""The data side of the recovery loop: the documents of a rollback's skip window, scored,
reviewed by an operator, and excluded from the mixture once confirmed.

    stats = quarantine_decision(record, "art/quarantined_documents/<decision id>", QuarantineConfig())
    record_review(ReviewAction(decision_id=..., action="confirm", reviewer="ana", reason="..."), ...)
    confirmed, status = resolve_confirmed(read_decision_documents(root), read_reviews(reviews))
    build_mixture(uris, out, MixtureConfig(), exclude=exclusion_reasons(confirmed, clusters_uri))

Never imports dagster; torch only while scoring.
"""

from pretrain.quarantine.build import (
    QuarantineStats,
    SkipRecord,
    quarantine_decision,
    read_decision_documents,
)
from pretrain.quarantine.config import ACTIONS, QuarantineConfig, ReviewAction
from pretrain.quarantine.report import mixture_token_shares, source_view, source_view_md
from pretrain.quarantine.review import (
    exclusion_reasons,
    read_confirmed,
    read_reviews,
    record_review,
    resolve_confirmed,
    write_confirmed,
)

__all__ = [
    "ACTIONS",
    "QuarantineConfig",
    "QuarantineStats",
    "ReviewAction",
    "SkipRecord",
    "exclusion_reasons",
    "mixture_token_shares",
    "quarantine_decision",
    "read_confirmed",
    "read_decision_documents",
    "read_reviews",
    "record_review",
    "resolve_confirmed",
    "source_view",
    "source_view_md",
    "write_confirmed",
]
