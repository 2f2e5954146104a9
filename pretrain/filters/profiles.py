"""Per-source filter profiles: what each mixture source (web, news, books, code, ...) gets.

A profile is data, not code: :class:`SourceProfile` overrides a few settings of the base
:class:`pretrain.filters.config.FilterConfig` for the documents of one source. Every field
left at ``None`` inherits the base value; every rule family is on unless its flag is
``False`` (a family the base config switched off stays off). ``FilterConfig.profiles`` maps
source name → profile; sources without one get the base config::

    from pretrain.filters.config import FilterConfig
    from pretrain.filters.profiles import SourceProfile, default_profiles
    config = FilterConfig(profiles={
        **default_profiles(),
        "forum": SourceProfile(languages=("en", "de"), fineweb=False, c4_min_sentences=2),
    })
    config.for_source("books").long_documents  # "split": long books are cut into chunks

Default profiles (:func:`default_profiles`), measured on real data with
``bench/cleaning_text_kept.py`` (numbers in ``bench/RESULTS.md``):

- ``web``: the base config (C4 line rules judge paragraphs; no terminal-punctuation rule).
- ``news``: wire stories are short, hard-wrapped and full of figures: ``c4_min_sentences=2``,
  Gopher's minimum 30 words and 70% alphabetic words, no FineWeb (it counts physical lines).
- ``books``: any length: over ``max_chars`` a book is cut into chunks of ``chunk_chars`` at
  paragraph boundaries (Gopher's word maximum does not apply); no C4, FineWeb or Gopher
  repetition (verse, dialogue and chapter headings are short or repeated lines), no URL rules.
- ``encyclopedia``: the base config without FineWeb (lists and tables are content there).
- ``code``: code sources skip language ID and prose rules anyway; no URL rules.

``languages=("*",)`` keeps every language for that source whatever the base list says.
"""

from __future__ import annotations

from dataclasses import dataclass

from pretrain.errors import ConfigError
from pretrain.settings import check_types

ANY_LANGUAGE = "*"
LONG_DOCUMENT_POLICIES = ("reject", "keep", "split")
FAMILIES = ("urls", "gopher_repetition", "gopher_quality", "c4", "fineweb", "toxicity", "pii")


@dataclass(frozen=True, kw_only=True)
class SourceProfile:
    """Overrides for one source; ``None`` inherits the base FilterConfig's value."""

    languages: tuple[str, ...] | None = None  # ("*",): every language
    min_language_score: float | None = None
    min_chars: int | None = None
    max_chars: int | None = None
    long_documents: str | None = None  # "reject", "keep" or "split" (at paragraph boundaries)
    chunk_chars: int | None = None  # target chunk size when long_documents="split"
    max_removed_fraction: float | None = None  # share of chars line rules may remove
    c4_min_sentences: int | None = None
    gopher_min_doc_words: int | None = None
    gopher_min_alpha_words_ratio: float | None = None
    use_quality_model: bool = True  # False: heuristic quality_score, no classifier threshold
    unwrap: bool = True  # judge hard-wrapped paragraphs, not physical lines
    urls: bool = True
    gopher_repetition: bool = True
    gopher_quality: bool = True
    c4: bool = True
    fineweb: bool = True
    toxicity: bool = True
    pii: bool = True

    def __post_init__(self) -> None:
        check_types(self)
        if isinstance(self.languages, str):
            raise ConfigError(f"languages={self.languages!r}: use a tuple such as ('en',)")
        if self.languages is not None and not self.languages:
            raise ConfigError("languages=(): use None to inherit, ('*',) for every language")
        if self.long_documents is not None and self.long_documents not in LONG_DOCUMENT_POLICIES:
            raise ConfigError(
                f"long_documents={self.long_documents!r}: use one of {LONG_DOCUMENT_POLICIES}"
            )
        for name in ("min_chars", "max_chars", "chunk_chars", "c4_min_sentences",
                     "gopher_min_doc_words"):  # fmt: skip
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name}={value}: use a number >= 0, or None to inherit")
        for name in ("min_language_score", "max_removed_fraction", "gopher_min_alpha_words_ratio"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name}={value}: use a fraction in [0, 1], or None to inherit")


def default_profiles() -> dict[str, SourceProfile]:
    """The shipped profiles (see the module docstring for why each differs)."""
    return {
        "web": SourceProfile(),
        "news": SourceProfile(
            c4_min_sentences=2,
            gopher_min_doc_words=30,
            gopher_min_alpha_words_ratio=0.7,
            fineweb=False,
        ),
        "books": SourceProfile(
            long_documents="split", c4=False, fineweb=False, urls=False, gopher_repetition=False
        ),
        "encyclopedia": SourceProfile(fineweb=False),
        "code": SourceProfile(urls=False),
    }
