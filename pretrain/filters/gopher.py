"""Gopher quality and Gopher repetition rules (Rae et al. 2021, table A1), language-aware.

Published defaults; every threshold is a config field. Word-based rules use
:func:`pretrain.text.words`; for unsegmented languages (zh, ja, th, ...) each
character is a word, the mean-word-length rule is skipped and stop words come from the
per-language table (none configured → the stop-word rule is skipped)::

    from pretrain.filters.gopher import GopherQuality, GopherRepetition
    doc = {"text": "buy now\\n" * 40, "language": "en"}
    GopherRepetition()(doc)  # -> "gopher_dup_line_frac"
    GopherQuality()({"text": "too short", "language": "en"})  # -> "gopher_short_doc"

Repetition reasons: ``gopher_dup_para_frac``, ``gopher_dup_para_char_frac``,
``gopher_dup_line_frac``, ``gopher_dup_line_char_frac``, ``gopher_top_<n>_gram``,
``gopher_dup_<n>_gram``. Quality reasons: ``gopher_short_doc``, ``gopher_long_doc``,
``gopher_below_avg_word_length``, ``gopher_above_avg_word_length``,
``gopher_too_many_hashes``, ``gopher_too_many_ellipsis``, ``gopher_too_many_bullets``,
``gopher_too_many_end_ellipsis``, ``gopher_below_alpha_threshold``, ``gopher_few_stop_words``.

N-gram statistics are vectorized: word ids → 64-bit rolling hashes per n-gram (numpy), so a
document without repeated n-grams never enters a Python loop.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from pretrain.errors import ConfigError
from pretrain.filters.base import Document, Filter, Rejection
from pretrain.settings import check_types
from pretrain.text import is_symbol_word, is_unsegmented, words

# Gopher's stop words (the paper's eight) plus our own pick of very frequent Chinese characters.
DEFAULT_STOP_WORDS = {
    "en": ("the", "be", "to", "of", "and", "that", "have", "with"),
    "zh": ("的", "是", "了", "在", "和", "有", "不", "这"),
}
_PARAGRAPHS = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def doc_words(doc: Document) -> list[str]:
    """Words of ``doc["text"]``, cached on the document until its text changes."""
    text = doc["text"]
    cached = doc.get("_words")
    if cached is not None and cached[0] is text:
        return cached[1]
    tokens = words(text, unsegmented=is_unsegmented(doc.get("language")))
    doc["_words"] = (text, tokens)
    return tokens


@dataclass(frozen=True, kw_only=True)
class GopherRepetitionConfig:
    dup_line_frac: float = 0.3  # duplicate lines / lines
    dup_para_frac: float = 0.3  # duplicate paragraphs / paragraphs
    dup_line_char_frac: float = 0.2  # chars in duplicate lines / chars
    dup_para_char_frac: float = 0.2
    top_ngrams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16))
    dup_ngrams: tuple[tuple[int, float], ...] = (
        (5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10),
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)}: use a fraction in [0, 1]")
        for n, frac in (*self.top_ngrams, *self.dup_ngrams):
            if n < 1 or not 0.0 <= frac <= 1.0:
                raise ConfigError(f"n-gram rule ({n}, {frac}): use n >= 1 and a fraction in [0, 1]")


def _duplicates(parts: list[str]) -> tuple[int, int]:
    """(number of repeated elements, their characters); the first occurrence is not counted."""
    distinct = set(parts)  # every element but the first occurrence of each is a repeat
    return len(parts) - len(distinct), sum(map(len, parts)) - sum(map(len, distinct))


def _ngram_hashes(ids: np.ndarray, n: int) -> np.ndarray:
    hashes = np.zeros(len(ids) - n + 1, dtype=np.uint64)
    for k in range(n):
        hashes = hashes * _HASH_MULTIPLIER + ids[k : len(ids) - n + 1 + k]
    return hashes


def _longer_ngram_hashes(hashes: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    """The (n+1)-gram hashes from the n-gram ones: equal to ``_ngram_hashes(ids, n + 1)``."""
    return hashes[: len(ids) - n] * _HASH_MULTIPLIER + ids[n:]


class GopherRepetition(Filter):
    name = "gopher_repetition"

    def __init__(self, config: GopherRepetitionConfig | None = None) -> None:
        self.config = config or GopherRepetitionConfig()

    def check(self, doc: Document) -> Rejection | None:
        c, text = self.config, doc["text"]
        if not text:
            return "empty", "no text"
        paragraphs = _PARAGRAPHS.split(text.strip())
        dups, chars = _duplicates(paragraphs)
        if dups / len(paragraphs) > c.dup_para_frac:
            return "gopher_dup_para_frac", f"{dups}/{len(paragraphs)}"
        if chars / len(text) > c.dup_para_char_frac:
            return "gopher_dup_para_char_frac", f"{chars / len(text):.3f}"
        lines = _LINES.split(text)
        dups, chars = _duplicates(lines)
        if dups / len(lines) > c.dup_line_frac:
            return "gopher_dup_line_frac", f"{dups}/{len(lines)}"
        if chars / len(text) > c.dup_line_char_frac:
            return "gopher_dup_line_char_frac", f"{chars / len(text):.3f}"
        return self._check_ngrams(doc_words(doc), len(text))

    def _check_ngrams(self, tokens: list[str], num_chars: int) -> Rejection | None:
        # Word ids 1, 2, ... in order of first occurrence.
        vocab = {w: i for i, w in enumerate(dict.fromkeys(tokens), 1)}
        ids = np.fromiter(map(vocab.__getitem__, tokens), np.uint64, len(tokens))
        char_sums = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, tokens), np.int64, len(tokens)), out=char_sums[1:])
        hashes_of = _NgramHashes(ids)
        for n, frac in self.config.top_ngrams:
            if len(tokens) < n:
                continue
            hashes = hashes_of(n)
            values, counts = _groups(hashes)
            top = int(counts.max())
            # Ties: the n-gram seen first. With no repeat at all, that is the first n-gram.
            start = int(np.argmax(_holds(hashes, values[counts == top]))) if top > 1 else 0
            length = int(char_sums[start + n] - char_sums[start]) + n - 1  # joined with spaces
            if top * length / num_chars > frac:
                return f"gopher_top_{n}_gram", f"{top * length / num_chars:.3f}"
        for n, frac in self.config.dup_ngrams:
            if len(tokens) < n:
                continue
            hashes = hashes_of(n)
            lengths = char_sums[n:] - char_sums[:-n]
            values, counts = _groups(hashes)
            if counts.max() == 1:
                continue  # no n-gram occurs twice
            positions = np.flatnonzero(_holds(hashes, values[counts > 1]))
            _, first = np.unique(hashes[positions], return_index=True)
            repeats = np.delete(positions, first)  # every occurrence but the first
            if lengths[repeats].sum() / num_chars <= frac:
                continue  # an upper bound of the exact count below already passes
            dup_chars = _repeated_ngram_chars(
                hashes.tolist(), lengths.tolist(), n, repeats.tolist()
            )
            if dup_chars / num_chars > frac:
                return f"gopher_dup_{n}_gram", f"{dup_chars / num_chars:.3f}"
        return None


def _groups(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``hashes`` (ascending) and how often each occurs.

    A plain value sort: several times faster than the stable argsort behind
    ``np.unique(..., return_index=True)``.
    """
    ordered = np.sort(hashes)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[starts], np.diff(starts, append=len(ordered))


def _holds(hashes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which positions of ``hashes`` hold one of ``values`` (ascending, not empty)."""
    where = np.minimum(np.searchsorted(values, hashes), len(values) - 1)
    return values[where] == hashes


class _NgramHashes:
    """``_ngram_hashes(ids, n)`` for growing ``n``, each built from the last one computed."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids
        self.n = 0
        self.hashes = np.zeros(len(ids) + 1, dtype=np.uint64)

    def __call__(self, n: int) -> np.ndarray:
        if n < self.n:
            return _ngram_hashes(self.ids, n)
        while self.n < n:
            self.hashes = _longer_ngram_hashes(self.hashes, self.ids, self.n)
            self.n += 1
        return self.hashes


def _repeated_ngram_chars(hashes: list[int], lengths: list[int], n: int, repeats: list[int]) -> int:
    """Chars in repeated n-grams; after a repeat, skip past it (overlaps count once).

    ``repeats``: the positions (ascending) whose n-gram occurred earlier. Every other position
    holds a first occurrence, which cannot be in ``seen`` yet: runs of them are added at once.
    """
    seen: set[int] = set()
    chars = idx = 0
    for pos in repeats:
        if pos < idx:
            continue  # inside the n-gram counted last
        seen.update(hashes[idx:pos])
        if hashes[pos] in seen:
            chars += lengths[pos]
            idx = pos + n
        else:
            seen.add(hashes[pos])
            idx = pos + 1
    return chars


@dataclass(frozen=True, kw_only=True)
class GopherQualityConfig:
    min_doc_words: int = 50
    max_doc_words: int = 100_000
    min_avg_word_length: float = 3.0
    max_avg_word_length: float = 10.0
    max_symbol_word_ratio: float = 0.1  # '#' or '...' per word
    max_bullet_lines_ratio: float = 0.9
    max_ellipsis_lines_ratio: float = 0.3
    min_alpha_words_ratio: float = 0.8  # words with at least one letter
    min_stop_words: int = 2  # distinct stop words (case-sensitive, as datatrove)
    stop_words: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_STOP_WORDS))
    # The list for languages without one; None skips the rule for them (datatrove: "en").
    default_stop_words_language: str | None = None

    def __post_init__(self) -> None:
        check_types(self)
        if not 0 <= self.min_doc_words < self.max_doc_words:
            raise ConfigError("need 0 <= min_doc_words < max_doc_words")
        if not 0 < self.min_avg_word_length < self.max_avg_word_length:
            raise ConfigError("need 0 < min_avg_word_length < max_avg_word_length")
        for name in ("max_bullet_lines_ratio", "max_ellipsis_lines_ratio", "min_alpha_words_ratio"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name}={getattr(self, name)}: use a fraction in [0, 1]")
        if self.default_stop_words_language not in (None, *self.stop_words):
            raise ConfigError(
                f"default_stop_words_language={self.default_stop_words_language!r} has no list "
                f"in stop_words ({sorted(self.stop_words)}): add one or use None"
            )


class GopherQuality(Filter):
    name = "gopher_quality"

    def __init__(self, config: GopherQualityConfig | None = None) -> None:
        self.config = config or GopherQualityConfig()

    def _stop_words(self, language: str | None) -> frozenset[str]:
        table = self.config.stop_words
        if language in table:
            return frozenset(table[language])
        if is_unsegmented(language) or self.config.default_stop_words_language is None:
            return frozenset()
        return frozenset(table[self.config.default_stop_words_language])

    def check(self, doc: Document) -> Rejection | None:
        c, text, language = self.config, doc["text"], doc.get("language")
        tokens = doc_words(doc)
        counts = Counter(tokens)  # each rule below looks at every distinct word once
        symbols = [w for w in counts if is_symbol_word(w)]
        num_content = len(tokens) - sum(map(counts.__getitem__, symbols))
        if num_content < c.min_doc_words:
            return "gopher_short_doc", f"{num_content} words"
        if num_content > c.max_doc_words:
            return "gopher_long_doc", f"{num_content} words"
        if not is_unsegmented(language):
            content_chars = sum(map(len, tokens)) - sum(len(w) * counts[w] for w in symbols)
            mean = content_chars / num_content
            if mean < c.min_avg_word_length:
                return "gopher_below_avg_word_length", f"{mean:.2f}"
            if mean > c.max_avg_word_length:
                return "gopher_above_avg_word_length", f"{mean:.2f}"
        n = len(tokens)
        if text.count("#") / n > c.max_symbol_word_ratio:
            return "gopher_too_many_hashes", f"{text.count('#') / n:.3f}"
        ellipses = text.count("...") + text.count("…")
        if ellipses / n > c.max_symbol_word_ratio:
            return "gopher_too_many_ellipsis", f"{ellipses / n:.3f}"
        lines = text.splitlines() or [""]
        bullets = sum(line.lstrip().startswith(("•", "-")) for line in lines) / len(lines)
        if bullets > c.max_bullet_lines_ratio:
            return "gopher_too_many_bullets", f"{bullets:.3f}"
        end_ellipsis = sum(line.rstrip().endswith(("...", "…")) for line in lines) / len(lines)
        if end_ellipsis > c.max_ellipsis_lines_ratio:
            return "gopher_too_many_end_ellipsis", f"{end_ellipsis:.3f}"
        alpha_words = sum(
            k for w, k in counts.items() if w.isalpha() or any(ch.isalpha() for ch in w)
        )
        alpha = alpha_words / n
        if alpha < c.min_alpha_words_ratio:
            return "gopher_below_alpha_threshold", f"{alpha:.3f}"
        stop_words = self._stop_words(language)
        if stop_words and c.min_stop_words:
            found = len(stop_words.intersection(counts))
            if found < c.min_stop_words:
                return "gopher_few_stop_words", f"{found} stop words"
        return None
