"""Text primitives shared by the rule blocks: word splitting, punctuation, scripts.

Word-based rules (Gopher, C4, FineWeb) need words. For space-delimited languages
:func:`words` is a regex tokenizer close to spaCy's English rules (punctuation split off,
``don't`` → ``do`` + ``n't``, hyphens between letters are their own token). Languages written
without spaces (Chinese, Japanese, Thai, ...) get a character-based variant: every CJK/Thai
character is a word and other runs are split as usual::

    from pretrain.text import words, is_unsegmented
    words("Don't stop-me now...")   # ['Do', "n't", 'stop', '-', 'me', 'now', '...']
    words("我爱北京 ok", unsegmented=True)  # ['我', '爱', '北', '京', 'ok']
    is_unsegmented("zh")  # True

The tokenizer is an approximation of spaCy's: the benchmark (``bench/filter_vs_datatrove.py``)
measures how often the rules that use it agree with datatrove's spaCy-based ones.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex

# Languages whose text has no spaces between words (ISO 639 codes as fastText LID-176 emits).
UNSEGMENTED_LANGUAGES = frozenset(
    {"zh", "ja", "th", "lo", "km", "my", "bo", "wuu", "yue", "dz", "gan", "lzh"}
)

# Sentence-final punctuation across scripts (our own list: Latin, CJK, Arabic, Devanagari, ...).
TERMINAL_PUNCTUATION = (
    ".", "!", "?", "。", "！", "？", "｡", "؟", "۔", "।", "॥", "።", "፧", "჻", "‼", "⁇", "⁈", "⁉",
    "︒", "﹒", "﹖", "﹗", "．", "…", "؛", "፨", "᙮", "꓿", "꘎", "꛳", "꛷", "᠃", "᠉",
)  # fmt: skip

_TOKEN = regex.compile(
    r"""
      (?<!\S)\p{L}+(?!\S)                           # only letters between spaces: the word
                                                    # branch's token, without trying the others
    | https?://[^\s]+?(?=[.,;:!?)\]"']*(?:\s|$))   # a URL stays one token
    | \p{N}+(?:[.,:/]\p{N}+)+                       # 3.14  1,000  10:30  1/2
    | (?:\p{L}\.){2,}                               # U.S.  e.g.
    | \p{L}+(?=n['’]t\b)                            # do|n't
    | n['’]t\b
    | ['’]\p{L}+\b                                  # 's  're
    | [\p{L}\p{M}\p{N}_]+                           # a word
    | \.{2,}                                        # an ellipsis
    | [^\s]                                         # any other symbol, one per token
    """,
    regex.VERBOSE,
)
_UNSEGMENTED_CHAR = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}]"
)
_UNSEGMENTED_TOKEN = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}]"
    r"|[\p{L}\p{M}\p{N}_]+|[^\s]"
)


def is_unsegmented(language: str | None) -> bool:
    """True for languages whose words are not separated by spaces."""
    return language in UNSEGMENTED_LANGUAGES


def weighted_length(text: str, cjk_char_weight: float = 1.0) -> float:
    """Length in characters where each CJK/Thai character counts ``cjk_char_weight`` times.

    One Chinese character carries about as much as three Latin ones (a 40-character Chinese
    sentence is a full sentence), so length minimums written in Latin characters use this.
    """
    if cjk_char_weight == 1.0:
        return float(len(text))
    return len(text) + (cjk_char_weight - 1.0) * len(_UNSEGMENTED_CHAR.findall(text))


def words(text: str, *, unsegmented: bool = False) -> list[str]:
    """Word tokens of ``text`` (punctuation tokens included, whitespace never a token)."""
    if unsegmented:
        return _UNSEGMENTED_TOKEN.findall(text)
    return _TOKEN.findall(text)


@lru_cache(maxsize=4096)
def is_symbol_char(char: str) -> bool:
    """Punctuation, symbols and control characters (Unicode categories P*, S*, Cc)."""
    category = unicodedata.category(char)
    return category[0] in "PS" or category == "Cc"


def is_symbol_word(word: str) -> bool:
    """A token made only of punctuation/symbols (``--``, ``#``, ``...``)."""
    return all(is_symbol_char(c) for c in word)
