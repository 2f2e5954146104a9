"""The toxicity rule's models read only their languages, and the output says what judged a page.

A stand-in for the shipped model flags every sentence it is given, so what it is *not* given
shows: documents of other languages, and sentences of another language inside a page that
language ID calls English. Sentences here are our own.
"""

from __future__ import annotations

import pytest

from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
from pretrain.filters.toxicity_classifier import words_of
from pretrain.filters.toxicity_evidence import looks_foreign


class FlagsEverything:
    """A shipped model of English that gives every sentence it reads P(toxic) = 0.99."""

    version, languages, card = "stand-in", ("en",), {}

    def __init__(self) -> None:
        self.read: list[str] = []

    def probabilities_of_words(self, words: list[list[str]]) -> list[float]:
        self.read += [" ".join(w) for w in words]
        return [0.99] * len(words)


ENGLISH = [
    "The market opens at nine on Saturdays.",
    "Bring your own bags if you can.",
    "The bakery stall sells out before noon.",
]
GERMAN = [
    "Der Markt öffnet am Samstag um neun Uhr.",
    "Bringen Sie bitte eigene Taschen mit.",
    "Der Bäcker ist meistens vor Mittag ausverkauft.",
]
MIN_NAN = "Thó-lūn:Nointel sī Hoat-kok ê chi̍t ê chng-thâu, tī Val-d'Oise séng."


def _rule(**settings: object) -> tuple[ToxicityFilter, FlagsEverything]:
    model = FlagsEverything()
    config = ToxicityConfig(model=None, min_toxic_sentences=1, max_toxic_share=0.01, **settings)
    return ToxicityFilter(config, shipped=model), model


@pytest.mark.parametrize(
    ("sentence", "foreign"),
    [
        ("I hate trans people.", False),  # no common English word, but nothing foreign either
        ("Muslims are all terrorists waiting for their chance.", False),
        ("The bakery stall sells out before noon.", False),
        ("Der Markt öffnet am Samstag um neun Uhr.", True),
        ("Le marché ouvre à neuf heures le samedi.", True),
        ("El mercado abre a las nueve los sábados.", True),
        (MIN_NAN, True),  # no function word of a listed language: mostly non-ASCII words
    ],
)
def test_looks_foreign(sentence: str, foreign: bool) -> None:
    assert looks_foreign(words_of(sentence)) is foreign


def test_the_model_reads_only_the_english_sentences_of_an_english_page() -> None:
    rule, model = _rule()
    page = {"text": "\n\n".join(ENGLISH + GERMAN + [MIN_NAN]), "language": "en"}
    rejection = rule.check(page)
    assert rejection is not None and rejection[0] == "toxic_content"
    assert sorted(model.read) == sorted(" ".join(words_of(s)) for s in ENGLISH)
    assert page["_toxicity"][1:3] == (3, 7)  # 3 flagged of 7 counted: the others count, unflagged
    assert rejection[1].endswith("judged by models: en)")
    # an "English" page whose every sentence looks like another language: the word lists alone
    foreign = {"text": "\n\n".join(GERMAN + [MIN_NAN]), "language": "en"}
    assert rule.check(foreign) is None and rule.judged_by(foreign) == "word lists: en"
    assert len(model.read) == 3  # still only the three English sentences of the first page


def test_a_page_in_another_language_is_judged_by_its_word_list_or_by_nothing() -> None:
    rule, model = _rule()
    german = {"text": " ".join(GERMAN), "language": "de"}
    assert rule.check(german) is None and model.read == []  # the model never reads German
    assert rule.judged_by(german) == "word lists: de" and german["toxicity_score"] is None
    insult = {"text": " ".join(GERMAN) + " Du bist ein Arschloch, hau ab.", "language": "de"}
    rejection = rule.check(insult)
    assert rejection is not None and rejection[1].endswith("judged by word lists: de)")
    assert insult["toxicity_score"] == pytest.approx(1 / 4) and model.read == []
    swahili = {"text": "Soko linafunguliwa saa tatu asubuhi siku ya Jumamosi.", "language": "sw"}
    assert rule.check(swahili) is None and rule.unscored(swahili)
    assert rule.judged_by(swahili) == "none: sw" and swahili["toxicity_score"] is None
    english = {"text": " ".join(ENGLISH), "language": "en"}
    assert rule.judged_by(english) == "models: en" and not rule.unscored(english)


def test_a_document_without_a_language_is_judged_by_the_every_language_list() -> None:
    rule, model = _rule()
    doc = {"text": " ".join(ENGLISH), "language": None}
    assert rule.check(doc) is None and model.read == [] and rule.judged_by(doc) == "none: None"
