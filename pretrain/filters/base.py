"""The filter contract shared by every rule (datatrove style).

A filter looks at one document (a dict with the DOCUMENT_SCHEMA fields) and returns ``None``
to keep it or a stable snake_case reason to drop it. ``check`` also returns a short detail
(the measured value) that goes into the rejects table for audit::

    class TooShort(Filter):
        name = "too_short"

        def check(self, doc):
            n = len(doc["text"])
            return None if n >= 10 else ("too_short", f"{n} chars")

    TooShort()({"text": "hi"})  # -> "too_short"

Filters may annotate the document they look at (language ID sets ``language`` and
``language_score``); they never change ``text`` — that is normalization's job.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

Document = dict[str, Any]
Rejection = tuple[str, str]  # (reason, detail)


class Filter(ABC):
    """One keep/drop rule with a stable name."""

    name: str = "filter"

    @abstractmethod
    def check(self, doc: Document) -> Rejection | None:
        """``None`` to keep ``doc``; otherwise ``(reason, detail)``."""

    def __call__(self, doc: Document) -> str | None:
        result = self.check(doc)
        return None if result is None else result[0]


def is_code(doc: Document, code_sources: tuple[str, ...]) -> bool:
    """Code documents get code-aware treatment (no language filter, fewer heuristics)."""
    return doc.get("source") in code_sources
