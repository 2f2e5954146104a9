"""Toxicity: the shipped sentence model, word lists, and the share-of-sentences aggregation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pretrain.errors import ConfigError
from pretrain.filters.profanity_model import sentence_probabilities
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter, split_sentences

CALM = (
    "The library opened a new reading room on the second floor last spring. "
    "It has tall windows that face the park. Volunteers run a reading group there on Tuesdays. "
    "The room is quiet in the mornings and busier after school. "
    "Everyone agrees that the change has made the building more welcoming. "
    "Next year the city plans to repaint the hall. Donations paid for the new shelves. "
    "A local artist painted the mural by the stairs. The cafe sells tea and cake. "
    "Opening hours are on the notice board. "
)
INSULTS = "You are a worthless idiot and everyone hates you. Shut up, you stupid moron. "
# 40 distinct calm sentences: a repeated sentence counts once in the share
LONG_CALM = (
    " ".join(
        f"The {thing} near the {place} was repainted in {month}."
        for thing, place, month in zip(
            ["bridge", "library", "bakery", "garden", "museum", "harbour", "market", "tower"] * 5,
            ["river", "station", "school", "church", "square"] * 8,
            [m for m in ("March", "April", "May", "June", "July") for _ in range(8)],
            strict=True,
        )
    )
    + " "
)


def _doc(text: str, language: str | None = "en") -> dict:
    return {"text": text, "language": language}


def test_split_sentences_keeps_hard_wrapped_sentences_whole() -> None:
    text = "First one.\nThis sentence is wrapped\nacross two lines! Next?\n\nHeading\n- item"
    assert split_sentences(text) == [
        "First one.",
        "This sentence is wrapped\nacross two lines!",
        "Next?",
        "Heading",
        "- item",
    ]
    assert [len(s) for s in split_sentences("x" * 4500)] == [2000, 2000, 500]


def test_model_separates_insults_from_calm_text() -> None:
    calm, insult = sentence_probabilities(
        ["Have a nice day at the park.", "Shut up, you stupid moron."]
    )
    assert calm < 0.2 and insult > 0.9


# the tests below put two toxic sentences in a text and look at the share of flagged sentences
TWO = ToxicityConfig(min_toxic_sentences=2, max_toxic_share=0.06)


def test_score_is_share_of_flagged_sentences_on_every_doc() -> None:
    rule = ToxicityFilter(TWO)
    calm, mixed, hostile = _doc(CALM), _doc(CALM + INSULTS), _doc(INSULTS * 2)
    scores = rule.score_batch([calm, mixed, hostile])
    assert scores[0] == 0.0 and calm["toxicity_score"] == 0.0
    assert scores[1] == pytest.approx(2 / 12)  # two insult sentences after ten calm ones
    assert scores[2] == 1.0
    assert rule.check(calm) is None
    assert rule.check(mixed)[0] == "toxic_content"
    reason, detail = rule.check(hostile)
    assert reason == "toxic_content" and detail.startswith("1.000 (2/2 sentences")  # distinct


def test_one_swear_word_in_a_long_document_is_kept() -> None:
    rule = ToxicityFilter()
    doc = _doc(LONG_CALM + "That exam was a fucking nightmare. ")
    assert rule.check(doc) is None  # 1 flagged sentence of 41: under the share and the count
    assert doc["toxicity_score"] == pytest.approx(1 / 41)
    short = _doc("Shut up, you stupid moron.")
    assert rule.check(short)[0] == "toxic_content"  # one sentence: the count is min(3, 1)


def test_insults_in_a_novels_dialogue_stay_under_the_share() -> None:
    rule = ToxicityFilter(TWO)
    novel = _doc(LONG_CALM + '"You idiot," said Turnbull. "Shut up, you stupid moron." ')
    assert rule.check(novel) is None  # 2 of 42 sentences: 0.048 < 0.06
    assert novel["toxicity_score"] == pytest.approx(2 / 42)
    repeated = _doc(CALM * 4 + '"You idiot," said Turnbull. "Shut up, you stupid moron." ')
    assert rule.check(repeated)[0] == "toxic_content"  # 2 of 12 distinct: repeats do not dilute


def test_model_only_for_its_languages_and_word_lists_per_language(tmp_path: Path) -> None:
    rule = ToxicityFilter()
    assert rule.check(_doc(INSULTS * 2, language="fr")) is None  # English model not applied
    german = "Du bist ein Arschloch. Halt die Klappe, du Wichser. Guten Tag. "
    assert rule.check(_doc(german, language="de"))[0] == "toxic_content"
    assert "wichser" in rule.check(_doc(german, language="de"))[1]
    lists = tmp_path / "words.json"
    lists.write_text(json.dumps({"de": ["mist"], "*": ["badword"]}))
    custom = ToxicityFilter(ToxicityConfig(word_lists_uri=str(lists), model=None))
    assert custom.check(_doc(german, language="de")) is None  # the file replaces the built-ins
    assert custom.check(_doc("So ein Mist. Alles Mist. Gut.", language="de"))[0] == "toxic_content"
    assert custom.check(_doc("A badword here. Another badword.", language="sv")) is not None
    # the models off: no listed word, nothing flags them
    words_only = ToxicityFilter(ToxicityConfig(model=None, shipped_model=None))
    assert words_only.check(_doc(INSULTS * 2)) is None


def test_a_sentence_naming_a_group_is_flagged_from_the_identity_threshold() -> None:
    attack = "The Jews control the media and the banks. They are destroying our race. "
    low = sentence_probabilities(attack.split(". ")[:2])
    assert all(0.08 <= p < 0.5 for p in low)  # no insult: the profanity model alone misses it
    profanity_only = ToxicityConfig(shipped_model=None, identity_threshold=None)
    assert ToxicityFilter(profanity_only).check(_doc(CALM + attack)) is None
    # the profanity model's identity rule (0.3 by default since toxicity-v4; 0.08 before v1)
    rule = ToxicityFilter(replace(profanity_only, identity_threshold=0.08, min_toxic_sentences=2))
    doc = _doc(CALM + attack)
    assert rule.check(doc)[0] == "toxic_content"  # 2 of 12 sentences name a group, hostile
    assert doc["toxicity_score"] == pytest.approx(2 / 12)
    # the shipped model flags "destroying our race" but not the media trope (0.08): since
    # toxicity-v2 naming a group is no sign of hate by itself (bench/RESULTS.md, the trade-off)
    shipped = _doc(CALM + attack)
    assert ToxicityFilter(TWO).check(shipped) is None
    assert shipped["toxicity_score"] == pytest.approx(1 / 12)
    # "white" and "black" alone are everyday words: the White House, a black market.
    news = "The White House said the black market for fuel grew. Officials met on Monday. "
    assert rule.score_batch([_doc(CALM + news)]) == [0.0]
    assert ToxicityFilter().score_batch([_doc(CALM + news)]) == [0.0]
    assert rule.check(_doc(attack, language="de")) is None  # the English rule stays English


def test_listed_phrases_match_as_whole_words_and_flag_a_sentence_outright(tmp_path: Path) -> None:
    # Coded hate scores low in a profanity model; the built-in list names it (1-3 words).
    coded = "They talk of white genocide again. The mud races keep coming here. "
    assert all(p < 0.5 for p in sentence_probabilities(coded.split(". ")[:2]))
    doc = _doc(CALM + coded)
    assert ToxicityFilter(replace(TWO, model=None)).check(doc)[0] == "toxic_content"
    assert "mud races" in doc["_toxicity"][4] and "white genocide" in doc["_toxicity"][4]
    lists = tmp_path / "phrases.json"
    lists.write_text(json.dumps({"en": ["bad apple", "rotten-egg", "old sour milk"]}))
    rule = ToxicityFilter(replace(TWO, word_lists_uri=str(lists), model=None))
    assert rule.check(_doc("A bad apple. A Rotten egg! Bad apples and a bad day.")) is not None
    assert rule.check(_doc("The apple was bad. An egg, rotten, fell. A bad, apple day.")) is None
    triple = _doc("Old sour milk again. Some OLD SOUR MILK! Sour old milk is fine.")
    assert rule.check(triple) is not None and triple["_toxicity"][1] == 2
    assert rule.check(_doc("Old milk, sour. Milk old sour. Sour milk is old.")) is None


def test_boilerplate_lines_of_a_forum_page_do_not_dilute_the_share() -> None:
    boilerplate = "\n".join(f"Quote\nPosts: {1200 + i:,}\nMar {1990 + i}" for i in range(14))
    page = _doc(CALM + "\n" + boilerplate + "\n" + INSULTS)
    rule = ToxicityFilter(TWO)
    assert rule.check(page)[0] == "toxic_content"
    assert page["toxicity_score"] == pytest.approx(2 / 12)  # the 42 short lines are not counted
    every_line = ToxicityFilter(replace(TWO, min_sentence_words=1))
    assert every_line.check(_doc(page["text"])) is None  # 2 of 41: diluted under 0.06
    # a line the page repeats (the same button under every post) counts once, even so
    repeated = _doc(CALM + "\n" + "\n".join(["Reply With Quote"] * 14) + "\n" + INSULTS)
    assert every_line.check(repeated)[0] == "toxic_content"
    assert repeated["toxicity_score"] == pytest.approx(2 / 13)


def test_unsegmented_languages_match_substrings() -> None:
    rule = ToxicityFilter(TWO)
    doc = _doc("你这个傻逼。他妈的真烦。今天天气很好。", language="zh")
    assert rule.check(doc)[0] == "toxic_content"
    assert doc["toxicity_score"] == pytest.approx(2 / 3)


def test_threshold_is_configurable_and_rescored_when_text_changes() -> None:
    strict = ToxicityFilter(ToxicityConfig(max_toxic_share=0.5))
    doc = _doc(CALM + INSULTS)
    assert strict.check(doc) is None  # 2/12 < 0.5
    doc["text"] = INSULTS
    assert strict.check(doc)[0] == "toxic_content" and doc["toxicity_score"] == 1.0


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="model="):
        ToxicityConfig(model="perspective")
    with pytest.raises(ConfigError, match="max_toxic_share"):
        ToxicityConfig(max_toxic_share=0.0)
    with pytest.raises(ConfigError, match="min_sentence_words"):
        ToxicityConfig(min_sentence_words=0)
    with pytest.raises(ConfigError, match="identity_threshold"):
        ToxicityConfig(identity_threshold=1.5)
    with pytest.raises(ConfigError, match="tuple"):
        ToxicityConfig(model_languages="en")  # type: ignore[arg-type]
