"""Line-based web rules: C4 (Raffel et al. 2020) and FineWeb's quality rules (Penedo et al. 2024).

C4 is a cleaner *and* a filter: it removes lines (fewer than 3 words, a 1000+ character word,
"javascript", cookie/terms-of-use notices, Wikipedia citation marks; no terminal punctuation
only when ``drop_lines_without_terminal_punct`` is set, off by default as in FineWeb) and then
drops the document if what is left has fewer than 5 sentences, or if a kept line contains
"lorem ipsum" or a curly bracket. Hard-wrapped text is judged paragraph by paragraph (see
:mod:`.unwrap`); characters removed per line rule go to ``doc["_chars_removed"]``. FineWeb drops documents whose lines mostly
lack terminal punctuation, are mostly short, repeat characters, or that are lists::

    from pretrain.filters.c4_fineweb import C4Filter, FineWebFilter
    doc = {"text": "Menu\\nHome\\nThe cat sat on the mat. It purred. " * 3, "language": "en"}
    C4Filter().check(doc)        # None or ("c4_too_few_sentences", ...); may shorten doc["text"]
    FineWebFilter().check(doc)   # e.g. ("fineweb_short_line_ratio", "0.700")

C4 reasons: ``c4_lorem_ipsum``, ``c4_curly_bracket``, ``c4_too_few_sentences``.
FineWeb reasons: ``fineweb_line_punct_ratio``, ``fineweb_short_line_ratio``,
``fineweb_char_dup_ratio``, ``fineweb_list_ratio``. Unsegmented languages count characters
where the rules count words.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.filters.base import Document, Filter, Rejection
from pretrain.filters.gopher import _duplicates, doc_words
from pretrain.filters.unwrap import Paragraph, UnwrapConfig, join_paragraphs, paragraphs
from pretrain.settings import check_types
from pretrain.text import TERMINAL_PUNCTUATION, is_unsegmented, words

_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_C4_END = (".", "?", "!", '"', "'")
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies",
           "use of cookies", "use cookies")  # fmt: skip
_SENTENCE_END = frozenset("".join(TERMINAL_PUNCTUATION))
_CLOSERS = frozenset("\"'”’)]»")


@dataclass(frozen=True, kw_only=True)
class C4Config:
    min_sentences: int = 5  # after line removal; 0 disables
    min_words_per_line: int = 3
    max_word_length: int = 1000
    remove_citations: bool = True
    # Off by default, as in FineWeb: it assumes one paragraph per line and guts wrapped text.
    drop_lines_without_terminal_punct: bool = False
    drop_lorem_ipsum: bool = True
    drop_javascript_lines: bool = True
    drop_curly_bracket: bool = True
    drop_policy_lines: bool = True

    def __post_init__(self) -> None:
        check_types(self)
        if min(self.min_sentences, self.min_words_per_line) < 0 or self.max_word_length < 1:
            raise ConfigError("C4Config: counts must be >= 0 and max_word_length >= 1")


def count_sentences(line: str, *, unsegmented: bool = False) -> int:
    """Sentences in one line: runs of terminal punctuation followed by more text, plus a tail."""
    return _count_sentences(words(line, unsegmented=unsegmented), {})


def _token_kind(token: str) -> str:
    """``e``: terminal punctuation only; ``c``: closing quotes/brackets only; ``w``: the rest."""
    first = token[0]  # the two sets are disjoint: the first character decides which to test
    if first in _SENTENCE_END:
        return "e" if set(token) <= _SENTENCE_END else "w"
    if first in _CLOSERS:
        return "c" if set(token) <= _CLOSERS else "w"
    return "w"


def _count_sentences(tokens: list[str], kinds: dict[str, str]) -> int:
    """:func:`count_sentences` of a line's tokens; ``kinds`` caches :func:`_token_kind`.

    Closers change nothing; a run of terminal tokens after text ends a sentence. So in the
    kinds without the ``c``s, every ``we`` ends one and a trailing ``w`` is one more.
    """
    for token in set(tokens).difference(kinds):
        kinds[token] = _token_kind(token)
    sequence = "".join(map(kinds.__getitem__, tokens)).replace("c", "")
    return sequence.count("we") + sequence.endswith("w")


class C4Filter(Filter):
    """Removes C4's bad lines from ``doc["text"]`` in place, then applies the document rules.

    Lines are judged as paragraphs (:func:`pretrain.filters.unwrap.paragraphs`): a hard-wrapped
    paragraph is kept or removed whole. The characters each line rule removed are added to
    ``doc["_chars_removed"]`` (``{rule: chars}``) so the pipeline can report and bound them.
    """

    name = "c4"

    def __init__(self, config: C4Config | None = None, unwrap: UnwrapConfig | None = None) -> None:
        self.config = config or C4Config()
        self.unwrap = unwrap

    def check(self, doc: Document) -> Rejection | None:
        c = self.config
        unsegmented = is_unsegmented(doc.get("language"))
        kept: list[Paragraph] = []
        removed: Counter[str] = Counter()
        sentences = 0
        kinds: dict[str, str] = {}  # token -> kind, for counting sentences
        kept_words: list[str] = []  # the words of the kept lines, in order
        for paragraph in paragraphs(doc["text"], self.unwrap):
            line = paragraph.joined
            reason = None
            if len(line) > c.max_word_length and any(
                len(w) > c.max_word_length for w in line.split()
            ):
                reason = "c4_long_word"
            elif c.remove_citations and "[" in line and _CITATION.search(line):
                cleaned = tuple(_CITATION.sub("", part) for part in paragraph.lines)
                removed["c4_citation"] += paragraph.num_chars - sum(map(len, cleaned))
                paragraph = Paragraph(cleaned, paragraph.blank_before)
                line = paragraph.joined
            if reason is None:
                reason = self._line_reason(line, unsegmented)
            if reason in ("c4_lorem_ipsum", "c4_curly_bracket"):
                return reason, line[:80]
            if reason is not None:
                removed[reason] += paragraph.num_chars
                continue
            if c.min_sentences:
                tokens = words(line, unsegmented=unsegmented)
                sentences += _count_sentences(tokens, kinds)
                kept_words += tokens
            kept.append(paragraph)
        if sentences < c.min_sentences:
            return "c4_too_few_sentences", f"{sentences} sentences"
        joined = join_paragraphs(kept)
        doc["text"] = joined.strip()
        if c.min_sentences and len(doc["text"]) == len(joined):
            # Words never span whitespace, so the kept lines' words are the new text's words
            # (unless strip() removed a character the tokenizer keeps, such as U+001F).
            doc["_words"] = (doc["text"], kept_words)
        if removed:
            doc.setdefault("_chars_removed", Counter()).update(+removed)
        return None

    def _line_reason(self, line: str, unsegmented: bool) -> str | None:
        """Why C4 removes this line (or drops the document), else ``None``."""
        c = self.config
        if c.drop_lines_without_terminal_punct and (
            not line.endswith(TERMINAL_PUNCTUATION if unsegmented else _C4_END)
            or line.endswith("...")
        ):
            return "c4_no_terminal_punct"
        num_words = len(words(line, unsegmented=True)) if unsegmented else len(line.split())
        if num_words < c.min_words_per_line:
            return "c4_few_words"
        lower = line.lower()
        if c.drop_lorem_ipsum and "lorem ipsum" in lower:
            return "c4_lorem_ipsum"
        if c.drop_javascript_lines and "javascript" in lower:
            return "c4_javascript"
        if c.drop_curly_bracket and "{" in line:
            return "c4_curly_bracket"
        if c.drop_policy_lines and any(p in lower for p in _POLICY):
            return "c4_policy"
        return None


@dataclass(frozen=True, kw_only=True)
class FineWebConfig:
    min_line_punct_ratio: float = 0.12  # lines ending in terminal punctuation / lines
    max_short_line_ratio: float = 0.67  # lines of <= short_line_length chars / lines
    short_line_length: int = 30
    max_char_dup_ratio: float = 0.01  # chars in duplicate lines / chars
    max_newline_word_ratio: float = 0.3  # newlines / words ("list-like")

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("min_line_punct_ratio", "max_short_line_ratio", "max_char_dup_ratio"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)}: use a fraction in [0, 1]")
        if self.short_line_length < 1 or self.max_newline_word_ratio <= 0:
            raise ConfigError("short_line_length must be >= 1 and max_newline_word_ratio > 0")


class FineWebFilter(Filter):
    name = "fineweb"

    def __init__(self, config: FineWebConfig | None = None) -> None:
        self.config = config or FineWebConfig()

    def check(self, doc: Document) -> Rejection | None:
        c, text = self.config, doc["text"]
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return "empty", "no lines"
        punct = sum(line.endswith(TERMINAL_PUNCTUATION) for line in lines) / len(lines)
        if punct < c.min_line_punct_ratio:
            return "fineweb_line_punct_ratio", f"{punct:.3f}"
        short = sum(len(line) <= c.short_line_length for line in lines) / len(lines)
        if short > c.max_short_line_ratio:
            return "fineweb_short_line_ratio", f"{short:.3f}"
        dup_chars = _duplicates(lines)[1] / max(1, len(text) - text.count("\n"))
        if dup_chars > c.max_char_dup_ratio:
            return "fineweb_char_dup_ratio", f"{dup_chars:.3f}"
        newline_ratio = text.count("\n") / max(1, len(doc_words(doc)))
        if newline_ratio > c.max_newline_word_ratio:
            return "fineweb_list_ratio", f"{newline_ratio:.3f}"
        return None
