"""Whole-word term lookup (``pretrain.filters.terms.Terms``) against a plain reference: every
single word once per occurrence, every phrase of 2-3 consecutive words once."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pretrain.errors import ConfigError
from pretrain.filters.terms import Terms

TERMS = ("slur", "anti whites", "white genocide", "the great replacement", "the jews",
         "go back", "great")  # fmt: skip
WORDS = ("the", "great", "replacement", "white", "genocide", "anti", "whites", "slur", "go",
         "back", "jews", "a", "of")  # fmt: skip


def _reference(tokens: list[str]) -> Counter:
    found: Counter = Counter()
    for term in TERMS:
        words = term.split()
        if len(words) == 1:
            found[term] += tokens.count(term)
        elif any(tokens[i : i + len(words)] == words for i in range(len(tokens))):
            found[term] += 1
    return +found


def test_found_in_tokens_equals_a_plain_scan() -> None:
    terms = Terms(frozenset(TERMS))
    rng = random.Random(0)
    for _ in range(2000):
        tokens = [rng.choice(WORDS) for _ in range(rng.randint(0, 12))]
        assert Counter(terms.found_in_tokens(tokens)) == _reference(tokens), tokens
        assert terms.named_in_tokens(tokens) == bool(_reference(tokens)), tokens


def test_whole_words_only_and_phrases_at_the_edges() -> None:
    terms = Terms(frozenset(TERMS))
    assert terms.named_in("They talk of White Genocide.")
    assert terms.named_in("Anti-whites, they call us")  # the hyphen counts as a space
    assert not terms.named_in("slurry and greatness and the jewsharp")  # no part of a word
    assert not terms.named_in("go, then back")  # "go back" needs the words next to each other
    assert terms.found_in_tokens(["the", "great", "replacement"]) == ["great",
                                                                     "the great replacement"]  # fmt: skip
    with pytest.raises(ConfigError, match="1 to 3 words"):
        Terms(frozenset({"one two three four"}))
