"""Gopher-style heuristic rules with code-aware exemptions, and a simple quality score.

Prose gets every rule; code (``source`` in ``code_sources``) only the length and
repeated-line rules, with its own repeated-line limit (code repeats ``}`` and ``return``
lines legitimately). Languages written without spaces (zh, ja, th, ...) skip the word-count
and word-length rules::

    from pretrain.filters.heuristics import HeuristicConfig, HeuristicFilter, quality_score
    rules = HeuristicFilter(HeuristicConfig(min_words=50))
    rules({"text": "buy now\\n" * 40, "source": "web", "language": "en"})  # -> "repeated_lines"
    quality_score("A sentence that ends well.\\nAnother one.", code=False)  # in [0, 1]

Reasons: ``too_short``, ``too_long``, ``too_few_words``, ``repeated_lines``, ``symbol_ratio``,
``ellipsis_lines``, ``mean_word_length``, ``alpha_fraction``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import regex

from pretrain.errors import ConfigError
from pretrain.filters.base import Document, Filter, Rejection, is_code
from pretrain.settings import check_types
from pretrain.text import weighted_length

NO_SPACE_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "wuu", "yue", "dz"})
# A whitespace-separated word with a letter (str.isalpha == \p{L}), matched once, at its start.
_ALPHA_WORD = regex.compile(r"(?<!\S)[^\s\p{L}]*+\p{L}")
_TERMINAL_PUNCT = (".", "!", "?", '"', "'", "”", "’", "。", "！", "？", ":", ";")


@dataclass(frozen=True, kw_only=True)
class HeuristicConfig:
    min_chars: int = 50  # CJK/Thai characters count cjk_char_weight each
    cjk_char_weight: float = 3.0
    max_chars: int = 1_000_000
    min_words: int = 50
    max_repeated_line_fraction: float = 0.3  # duplicate lines / non-blank lines
    max_repeated_line_char_fraction: float = 0.2  # chars in duplicate lines / chars
    code_max_repeated_line_fraction: float = 0.6
    max_symbol_word_ratio: float = 0.1  # ('#' + '...') per word
    max_ellipsis_line_fraction: float = 0.3
    min_mean_word_length: float = 3.0
    max_mean_word_length: float = 10.0
    min_alpha_word_fraction: float = 0.8  # words with at least one letter
    code_sources: tuple[str, ...] = ("code",)

    def __post_init__(self) -> None:
        check_types(self)
        if not 0 <= self.min_chars < self.max_chars:
            raise ConfigError(
                f"min_chars={self.min_chars}, max_chars={self.max_chars}: "
                "need 0 <= min_chars < max_chars"
            )
        if not 0 < self.min_mean_word_length < self.max_mean_word_length:
            raise ConfigError(
                "mean word length bounds: need 0 < min_mean_word_length < max_mean_word_length"
            )
        for name in (
            "max_repeated_line_fraction",
            "max_repeated_line_char_fraction",
            "code_max_repeated_line_fraction",
            "max_ellipsis_line_fraction",
            "min_alpha_word_fraction",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)}: use a fraction in [0, 1]")
        if self.cjk_char_weight < 1.0:
            raise ConfigError(f"cjk_char_weight={self.cjk_char_weight}: use a weight >= 1")
        if self.min_words < 0 or self.max_symbol_word_ratio < 0:
            raise ConfigError("min_words and max_symbol_word_ratio must be >= 0")


@dataclass(frozen=True)
class TextStats:
    num_chars: int
    num_words: int
    mean_word_length: float
    alpha_word_fraction: float
    symbol_word_ratio: float
    ellipsis_line_fraction: float
    repeated_line_fraction: float
    repeated_line_char_fraction: float
    terminal_punct_line_fraction: float


def text_stats(text: str) -> TextStats:
    words = text.split()
    lines = [line.strip() for line in text.split("\n")]
    lines = [line for line in lines if line]
    num_words, num_lines = len(words), max(1, len(lines))
    counts = Counter(lines)
    # Gopher counts every occurrence after the first as a duplicate.
    duplicate_lines = sum(n - 1 for n in counts.values())
    duplicate_chars = sum(len(line) * (n - 1) for line, n in counts.items())
    line_chars = max(1, sum(len(line) for line in lines))
    symbols = text.count("#") + text.count("...") + text.count("…")
    return TextStats(
        num_chars=len(text),
        num_words=num_words,
        mean_word_length=sum(map(len, words)) / num_words if num_words else 0.0,
        alpha_word_fraction=len(_ALPHA_WORD.findall(text)) / num_words if num_words else 0.0,
        symbol_word_ratio=symbols / max(1, num_words),
        ellipsis_line_fraction=sum(line.endswith(("...", "…")) for line in lines) / num_lines,
        repeated_line_fraction=duplicate_lines / num_lines if duplicate_lines else 0.0,
        repeated_line_char_fraction=duplicate_chars / line_chars if duplicate_lines else 0.0,
        terminal_punct_line_fraction=sum(line.endswith(_TERMINAL_PUNCT) for line in lines)
        / num_lines,
    )


class HeuristicFilter(Filter):
    name = "heuristics"

    def __init__(self, config: HeuristicConfig | None = None) -> None:
        self.config = config or HeuristicConfig()

    def check(self, doc: Document) -> Rejection | None:
        c, s = self.config, text_stats(doc["text"])
        if weighted_length(doc["text"], c.cjk_char_weight) < c.min_chars:
            return "too_short", f"{s.num_chars} chars"
        if s.num_chars > c.max_chars:
            return "too_long", f"{s.num_chars} chars"
        if is_code(doc, c.code_sources):
            if s.repeated_line_fraction > c.code_max_repeated_line_fraction:
                return "repeated_lines", f"line fraction {s.repeated_line_fraction:.3f}"
            return None
        if s.repeated_line_fraction > c.max_repeated_line_fraction:
            return "repeated_lines", f"line fraction {s.repeated_line_fraction:.3f}"
        if s.repeated_line_char_fraction > c.max_repeated_line_char_fraction:
            return "repeated_lines", f"char fraction {s.repeated_line_char_fraction:.3f}"
        no_spaces = doc.get("language") in NO_SPACE_LANGUAGES
        if not no_spaces and s.num_words < c.min_words:
            return "too_few_words", f"{s.num_words} words"
        if s.symbol_word_ratio > c.max_symbol_word_ratio:
            return "symbol_ratio", f"{s.symbol_word_ratio:.3f}"
        if s.ellipsis_line_fraction > c.max_ellipsis_line_fraction:
            return "ellipsis_lines", f"{s.ellipsis_line_fraction:.3f}"
        if not no_spaces and not (
            c.min_mean_word_length <= s.mean_word_length <= c.max_mean_word_length
        ):
            return "mean_word_length", f"{s.mean_word_length:.2f}"
        if s.alpha_word_fraction < c.min_alpha_word_fraction:
            return "alpha_fraction", f"{s.alpha_word_fraction:.3f}"
        return None


def quality_score(text: str, *, code: bool) -> float:
    """A simple heuristic score in [0, 1] (a fastText quality classifier replaces it later).

    Prose: letters-in-words, sentence-like lines and non-repetition, weighted 0.4/0.3/0.3.
    Code: non-repetition, scaled into [0.5, 1] so code is never ranked by prose rules.
    """
    s = text_stats(text)
    unique = 1.0 - s.repeated_line_fraction
    if code:
        score = 0.5 + 0.5 * unique
    else:
        score = 0.4 * s.alpha_word_fraction + 0.3 * s.terminal_punct_line_fraction + 0.3 * unique
    return round(min(1.0, max(0.0, score)), 6)
