"""Text normalization applied before any filter: Unicode NFKC, line endings, control chars.

Prose: NFKC, ``\\r\\n``/``\\r`` → ``\\n``, control characters removed (tab and newline kept),
runs of spaces/tabs collapsed to one space, lines stripped, 3+ newlines collapsed to a blank
line. Code keeps its indentation: only line endings, control characters and trailing spaces
change (and NFKC, which Python applies to identifiers anyway)::

    from pretrain.filters.normalize import NormalizeConfig, normalize_text
    normalize_text("ﬁne\\u00a0 text\\r\\n\\x07", code=False)  # -> "fine text"
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.settings import check_types

# Control characters (Unicode category Cc) except tab and newline, plus BOM / noncharacters.
_CONTROL = {c: None for c in range(0x20) if c not in (0x09, 0x0A)}
_CONTROL.update({c: None for c in range(0x7F, 0xA0)})
_CONTROL.update({0xFEFF: None, 0xFFFE: None, 0xFFFF: None})
_HSPACE = re.compile(r"[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True, kw_only=True)
class NormalizeConfig:
    nfkc: bool = True
    collapse_whitespace: bool = True  # prose only; code keeps indentation
    code_sources: tuple[str, ...] = ("code",)

    def __post_init__(self) -> None:
        check_types(self)
        if isinstance(self.code_sources, str):
            raise ConfigError(
                f"code_sources={self.code_sources!r} is a string: use a tuple, e.g. ('code',)"
            )


def normalize_text(text: str, *, code: bool, config: NormalizeConfig | None = None) -> str:
    """Normalize one text; idempotent (normalizing twice changes nothing)."""
    config = config or NormalizeConfig()
    if config.nfkc:
        text = unicodedata.normalize("NFKC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").translate(_CONTROL)
    if code or not config.collapse_whitespace:
        text = _TRAILING.sub("", text)
    else:
        text = "\n".join(_HSPACE.sub(" ", line).strip() for line in text.split("\n"))
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip("\n") if code else text.strip()
