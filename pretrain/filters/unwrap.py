"""Hard-wrapped text: detect it, and group its physical lines into paragraphs for line rules.

Newswire (Reuters), Project Gutenberg books and e-mail break every paragraph into lines of
about 65–80 characters. Line rules written for one-paragraph-per-line web text (C4's
"a line must end in terminal punctuation", "a line needs 3 words") then remove most of such
a document. Here a text is *hard-wrapped* when its long lines cluster under a fixed width and
most of them end mid-sentence; its paragraphs are runs of lines ended by a blank line, an
indented line (Reuters marks paragraphs by indentation), a heading (no lowercase letter) or a
line much shorter than the width that ends a sentence::

    from pretrain.filters.unwrap import UnwrapConfig, mark_paragraphs, paragraphs
    text = "TITLE\\n  A story that goes on\\nand on.\\n      Next paragraph here\\nends.\\n"
    marked = mark_paragraphs(text, UnwrapConfig())   # blank line before the indented line
    [p.joined for p in paragraphs(marked, UnwrapConfig())]

:func:`mark_paragraphs` runs on the raw text (normalization strips indentation);
:func:`paragraphs` returns one :class:`Paragraph` per logical line, holding the physical
lines, so a rule can judge the paragraph and keep or remove all of its lines (the kept text
keeps its original line breaks). Text that is not hard-wrapped gives one paragraph per line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.settings import check_types
from pretrain.text import TERMINAL_PUNCTUATION

_PARAGRAPH_END = (*TERMINAL_PUNCTUATION, ":", ";")


@dataclass(frozen=True, kw_only=True)
class UnwrapConfig:
    max_width: int = 100  # a text whose long lines are wider is not hard-wrapped
    min_width: int = 30  # nor one whose lines are all shorter (menus, lists, verse)
    min_lines: int = 4  # non-blank lines needed to judge
    min_wrapped_share: float = 0.4  # lines near the width that end mid-sentence / lines
    paragraph_end_share: float = 0.6  # a line shorter than this share of the width ends one

    def __post_init__(self) -> None:
        check_types(self)
        if not 0 < self.min_width < self.max_width:
            raise ConfigError(
                f"min_width={self.min_width}, max_width={self.max_width}: need 0 < min < max"
            )
        if self.min_lines < 2:
            raise ConfigError(f"min_lines={self.min_lines}: use at least 2")
        for name in ("min_wrapped_share", "paragraph_end_share"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)}: use a fraction in (0, 1]")


@dataclass(frozen=True)
class Paragraph:
    lines: tuple[str, ...]  # the physical lines, stripped
    blank_before: bool  # a blank line separated it from the previous paragraph

    @property
    def joined(self) -> str:
        return " ".join(self.lines)

    @property
    def num_chars(self) -> int:
        return sum(map(len, self.lines))


def wrap_width(text: str, config: UnwrapConfig) -> int | None:
    """The line width a hard-wrapped ``text`` was wrapped at; ``None`` if it is not wrapped."""
    lengths = [len(line.strip()) for line in text.split("\n") if line.strip()]
    if len(lengths) < config.min_lines:
        return None
    width = sorted(lengths)[int(0.9 * (len(lengths) - 1))]
    if not config.min_width <= width <= config.max_width:
        return None
    near = config.paragraph_end_share * width
    mid_sentence = sum(
        1
        for line in text.split("\n")
        if near <= len(stripped := line.strip()) <= width
        and not stripped.endswith(TERMINAL_PUNCTUATION)
    )
    return width if mid_sentence / len(lengths) >= config.min_wrapped_share else None


def mark_paragraphs(text: str, config: UnwrapConfig) -> str:
    """Insert a blank line before each indented paragraph start of a hard-wrapped text.

    Indentation is the only paragraph mark that whitespace normalization would erase;
    texts that are not hard-wrapped, or not indented, come back unchanged.
    """
    if wrap_width(text, config) is None:
        return text
    lines = text.split("\n")
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
    base = Counter(indents).most_common(1)[0][0]
    if all(i == base for i in indents):
        return text
    out: list[str] = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" \t"))
        if line.strip() and indent > base and out and out[-1].strip():
            out.append("")
        out.append(line)
    return "\n".join(out)


def paragraphs(text: str, config: UnwrapConfig | None) -> list[Paragraph]:
    """Logical lines of ``text``: paragraphs if it is hard-wrapped, else one per line."""
    width = wrap_width(text, config) if config is not None else None
    found: list[Paragraph] = []
    current: list[str] = []
    blank_before = pending_blank = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            if current:
                found.append(Paragraph(tuple(current), blank_before))
                current = []
            pending_blank = bool(found)
            continue
        if not current:
            blank_before, pending_blank = pending_blank, False
        current.append(line)
        # a width implies a config; the check tells the type checker so
        if (
            width is None
            or config is None
            or _ends_paragraph(line, config.paragraph_end_share * width)
        ):
            found.append(Paragraph(tuple(current), blank_before))
            current = []
    if current:
        found.append(Paragraph(tuple(current), blank_before))
    return found


def _ends_paragraph(line: str, short: float) -> bool:
    """A heading (no lowercase letter), or a short line that ends a sentence."""
    if not any(c.islower() for c in line):
        return True
    return len(line) < short and line.rstrip("\"'”’)]»").endswith(_PARAGRAPH_END)


def join_paragraphs(kept: list[Paragraph]) -> str:
    """The text of the kept paragraphs: original line breaks, blank lines where there were."""
    parts: list[str] = []
    for paragraph in kept:
        if parts:
            parts.append("\n\n" if paragraph.blank_before else "\n")
        parts.append("\n".join(paragraph.lines))
    return "".join(parts)


def split_at_paragraphs(text: str, chunk_chars: int) -> list[str]:
    """Chunks of at most ``chunk_chars``, cut at the last blank line (else line break) in the
    second half of each window; only a window without any break is cut mid-line."""
    chunks, start = [], 0
    while start < len(text):
        end = min(len(text), start + chunk_chars)
        if end < len(text):
            cut = text.rfind("\n\n", start + chunk_chars // 2, end)
            if cut < 0:
                cut = text.rfind("\n", start + chunk_chars // 2, end)
            end = cut + 1 if cut >= 0 else end
        chunks.append(text[start:end].strip())
        start = end
    return [c for c in chunks if c]
