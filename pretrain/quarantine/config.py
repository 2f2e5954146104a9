"""Quarantine settings and the operator's review actions.

    QuarantineConfig(max_sequences=512, batch_size=8, preview_chars=160, top_documents=20)
    ReviewAction(decision_id="b00-s000000041-to-b01", action="confirm", reviewer="ana",
                 reason="random-token pages from one crawl", min_score=1.0)

A review is one of:

- ``confirm``: the decision's documents are excluded from the mixture (all of them, or only those
  whose suspicion score is at least ``min_score``);
- ``release``: none of the decision's documents is excluded any more (the spike was not theirs);
- ``extend``: ``doc_ids`` (e.g. documents of the same crawl found by hand) join the decision's
  confirmed set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pretrain.errors import ConfigError
from pretrain.filters.pii import PiiConfig

ACTIONS = ("confirm", "release", "extend")
DECISION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_decision_id(decision_id: str) -> str:
    """A decision id is a partition key and a folder name: letters, digits, ``_.-``."""
    if not DECISION_ID.match(decision_id):
        raise ConfigError(
            f"decision id {decision_id!r} must be 1-128 letters, digits, '_', '.' or '-' "
            "(e.g. 'b00-s000000041-to-b01', as the quarantine sensor names it)"
        )
    return decision_id


@dataclass(frozen=True, kw_only=True)
class QuarantineConfig:
    """How the documents of a skip window are scored and shown."""

    max_sequences: int = 512  # scored sequences per decision (the first ones read); rest unscored
    batch_size: int = 8  # sequences per forward pass
    reference_sequences: int = 64  # train sequences outside the window: the "normal" loss
    seed: int = 0  # which reference sequences
    device: str = "cpu"  # "cpu", "cuda" or "auto"
    preview_chars: int = 160  # text preview per document in the review table (PII masked)
    top_documents: int = 20  # rows of the review table (the most suspicious first)
    pii: PiiConfig = field(default_factory=PiiConfig)

    def __post_init__(self) -> None:
        small = {
            k: v
            for k, v in {
                "max_sequences": self.max_sequences,
                "batch_size": self.batch_size,
                "top_documents": self.top_documents,
                "reference_sequences": self.reference_sequences,
            }.items()
            if v < 1
        }
        if small:
            raise ConfigError(f"QuarantineConfig: {small} must be >= 1")
        if self.preview_chars < 0:
            raise ConfigError(
                f"QuarantineConfig.preview_chars={self.preview_chars}; use >= 0 (0 hides text)"
            )
        if self.device not in ("cpu", "cuda", "auto"):
            raise ConfigError(f"QuarantineConfig.device={self.device!r}; use cpu, cuda or auto")


@dataclass(frozen=True, kw_only=True)
class ReviewAction:
    """One operator decision about one rollback's quarantine; who and why are required."""

    decision_id: str
    # empty defaults so that a review without them is refused below, saying what to set
    action: str = ""
    reviewer: str = ""  # who decided
    reason: str = ""  # why
    min_score: float | None = None  # confirm: only documents scoring at least this
    doc_ids: tuple[str, ...] = ()  # extend: documents to add

    def __post_init__(self) -> None:
        check_decision_id(self.decision_id)
        if self.action not in ACTIONS:
            raise ConfigError(
                f"review action={self.action!r}; set action to one of {', '.join(ACTIONS)}"
            )
        hints = {"reviewer": "who decided, e.g. your name", "reason": "why, in a sentence"}
        missing = [
            f
            for f in hints
            if not isinstance(getattr(self, f), str) or not getattr(self, f).strip()
        ]
        if missing:
            raise ConfigError(
                "a quarantine review needs "
                + " and ".join(f"{f} ({hints[f]})" for f in missing)
                + f": set {' and '.join(missing)}; who decided and why are recorded in the run "
                "tags and the review log"
            )
        if self.action == "extend" and not self.doc_ids:
            raise ConfigError("action='extend' needs doc_ids: the documents to add")
        if self.action != "extend" and self.doc_ids:
            raise ConfigError(f"doc_ids are only for action='extend', not {self.action!r}")
        if self.min_score is not None and self.action != "confirm":
            raise ConfigError(f"min_score is only for action='confirm', not {self.action!r}")
