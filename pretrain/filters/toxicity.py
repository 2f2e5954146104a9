"""Toxic/adult word lists per language with a threshold on the flagged fraction of words.

Lists come from a JSON file ``{"en": ["word", ...], "de": [...], "*": [...]}`` (``*`` applies
to every language) given as ``word_lists_uri``; without a file a short built-in English list
of our own is used. Words match case-insensitively as whole tokens; for unsegmented languages
(zh, ja, ...) entries match as substrings and the fraction is over characters::

    from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
    rule = ToxicityFilter(ToxicityConfig(max_flagged_fraction=0.05))
    rule({"text": "a perfectly calm sentence about gardens", "language": "en"})  # -> None

Reason: ``toxic_words`` (detail: the fraction and the first flagged words).
"""

from __future__ import annotations

from dataclasses import dataclass

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.filters.base import Document, Filter, Rejection
from pretrain.filters.gopher import doc_words
from pretrain.filters.text import is_unsegmented

# Deliberately short and our own; production lists are passed in as a file.
DEFAULT_WORD_LISTS: dict[str, tuple[str, ...]] = {
    "en": (
        "fuck", "fucking", "fucked", "shit", "bitch", "cunt", "dick", "cock", "pussy",
        "porn", "porno", "xxx", "slut", "whore", "nude", "nudes", "blowjob", "handjob",
        "milf", "hentai", "camgirl", "escort",
    ),
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ToxicityConfig:
    word_lists_uri: str | None = None  # JSON {language: [words]}; None: DEFAULT_WORD_LISTS
    max_flagged_fraction: float = 0.01  # flagged words / words (chars / chars if unsegmented)
    min_flagged_words: int = 2  # fewer hits never drop a document, whatever its length

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_flagged_fraction <= 1.0:
            raise ConfigError(f"max_flagged_fraction={self.max_flagged_fraction}: use [0, 1]")
        if self.min_flagged_words < 1:
            raise ConfigError(f"min_flagged_words={self.min_flagged_words}: use at least 1")


def load_word_lists(uri: str | None) -> dict[str, frozenset[str]]:
    if uri is None:
        raw: dict = DEFAULT_WORD_LISTS
    else:
        raw = storage.read_json(uri)
        if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
            raise ConfigError(f"{uri}: expected a JSON object of language -> list of words")
    return {lang: frozenset(w.lower() for w in ws) for lang, ws in raw.items()}


class ToxicityFilter(Filter):
    name = "toxicity"

    def __init__(self, config: ToxicityConfig | None = None) -> None:
        self.config = config or ToxicityConfig()
        self._lists = load_word_lists(self.config.word_lists_uri)
        self._any = self._lists.get("*", frozenset())

    def check(self, doc: Document) -> Rejection | None:
        language = doc.get("language")
        words_list = self._lists.get(language, frozenset()) | self._any
        if not words_list:
            return None
        if is_unsegmented(language):
            text = doc["text"]
            hits = [w for w in words_list if w in text]
            flagged = sum(text.count(w) * len(w) for w in hits)
            count, total = sum(text.count(w) for w in hits), max(1, len(text))
        else:
            tokens = doc_words(doc)
            hits = [w for w in tokens if w.lower() in words_list]
            flagged = count = len(hits)
            total = max(1, len(tokens))
        fraction = flagged / total
        if count >= self.config.min_flagged_words and fraction > self.config.max_flagged_fraction:
            return "toxic_words", f"{fraction:.4f} ({', '.join(sorted(set(hits))[:3])})"
        return None
