"""Whole-word lookup of terms of one to three words (word lists, group and reporting terms).

Set operations on a text's lower-cased word tokens instead of a regex alternation (25x faster
on web text): a text without any term, the common case, costs two set operations, and a
phrase is looked for only when its first word is there (``tests/unit/filters/test_terms.py``)::

    from pretrain.filters.terms import Terms
    terms = Terms(frozenset({"white genocide", "anti-whites", "slur"}))
    terms.named_in("They talk of White Genocide.")  # True ("anti-whites" matches "anti whites")
"""

from __future__ import annotations

import re

from pretrain.errors import ConfigError

_WORD = re.compile(r"\w+")


class Terms:
    """Whole-word, case-insensitive lookup of terms of 1-3 words (hyphens count as spaces).

    Set operations on the text's word tokens, not a regex alternation (25x faster on web text):
    a text without any term, the common case, costs two set operations.
    """

    def __init__(self, terms: frozenset[str] | tuple[str, ...]) -> None:
        by_length: dict[int, set[tuple[str, ...]]] = {1: set(), 2: set(), 3: set()}
        for term in terms:
            words = tuple(_WORD.findall(term.lower()))
            if not 1 <= len(words) <= 3:
                raise ConfigError(f"term {term!r}: use 1 to 3 words")
            by_length[len(words)].add(words)
        self._singles = frozenset(w for (w,) in by_length[1])
        # first word -> its phrases of 2-3 words: (" a b " to find among the padded tokens, "a b")
        phrases: dict[str, list[tuple[str, str]]] = {}
        for words in sorted(by_length[2] | by_length[3]):
            phrases.setdefault(words[0], []).append((f" {' '.join(words)} ", " ".join(words)))
        self._phrases = {first: tuple(found) for first, found in phrases.items()}
        self._firsts = frozenset(self._phrases)

    @staticmethod
    def fits(terms: frozenset[str]) -> bool:
        """Whether every term has 1 to 3 words (otherwise match them with a regex)."""
        return all(1 <= len(_WORD.findall(t)) <= 3 for t in terms)

    def found_in_tokens(self, tokens: list[str]) -> list[str]:
        """The terms in the lower-cased word tokens of a text (single words once per
        occurrence, phrases once)."""
        found = (
            [] if self._singles.isdisjoint(tokens) else [t for t in tokens if t in self._singles]
        )
        firsts = self._firsts.intersection(tokens)
        if not firsts:
            return found
        # Tokens hold no spaces: " a b " is in the space-joined tokens exactly where "a" and
        # "b" follow each other (a substring search instead of a set of every word pair).
        padded = f" {' '.join(tokens)} "
        found.extend(
            term for first in sorted(firsts) for spaced, term in self._phrases[first]
            if spaced in padded
        )  # fmt: skip
        return found

    def named_in(self, text: str) -> bool:
        """Whether ``text`` contains one of the terms as whole words."""
        return self.named_in_tokens(_WORD.findall(text.lower()))

    def named_in_tokens(self, tokens: list[str]) -> bool:
        """Whether the lower-cased word tokens of a text contain one of the terms."""
        if not self._singles.isdisjoint(tokens):
            return True
        return not self._firsts.isdisjoint(tokens) and bool(self.found_in_tokens(tokens))
