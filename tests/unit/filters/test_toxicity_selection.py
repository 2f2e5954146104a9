"""Choosing the toxicity rule: the decision over the evidence, calibration on clean text only,
and the leave-one-source-out choice by the worst held-out set. Inline documents, a stand-in
model that scores sentences by an invented word."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
from pretrain.filters.toxicity_evidence import Evidence, Thresholds, collect, decide
from pretrain.filters.toxicity_selection import (
    FoldResult,
    calibrate,
    choose,
    rule_of,
    rules,
    run_fold,
    settings_of,
)


def _scores(words: list[list[str]]) -> list[float]:
    """Zorblings are hostile (0.97); a sentence about the weather is half suspect (0.6)."""
    return [0.97 if "zorblings" in w else 0.6 if "weather" in w else 0.05 for w in words]


def _evidence(texts: list[str]) -> Evidence:
    reader = ToxicityFilter(ToxicityConfig(shipped_model=None, model=None))  # word lists only
    # ... and the stand-in, which reads every sentence of a word or more
    english = replace(reader.reading, model_languages=frozenset({"en"}), min_model_words=1)
    evidence = collect([{"text": t, "language": "en"} for t in texts], english)
    evidence.score("shipped", _scores, frozenset({"en"}))
    return evidence


CALM = "The library opened a new reading room on the second floor last spring."
WEATHER = "The weather this weekend will be mild and dry across the valley."
HOSTILE = "The zorblings ruin every single town they move into."
RULE = Thresholds(min_toxic_sentences=2, max_toxic_share=0.1)


def test_decide_counts_flagged_sentences_and_their_share() -> None:
    docs = [
        HOSTILE,  # one sentence: min(2, 1) flagged are enough
        " ".join([HOSTILE, "The zorblings poison the wells of our towns.", CALM]),
        " ".join([HOSTILE] + [f"{CALM[:-1]} number {i}." for i in range(20)]),  # 1 of 21
        "\n".join([HOSTILE, "Menu", "Home", "Login"]),  # short lines count only when flagged
    ]
    flagged, counted, dropped = decide(_evidence(docs), replace(RULE, shipped=0.9))
    assert flagged.tolist() == [1, 2, 1, 1] and counted.tolist() == [1, 3, 21, 1]
    assert dropped.tolist() == [True, True, False, True]
    # no shipped threshold: the model's scores flag nothing
    assert decide(_evidence(docs), RULE)[2].tolist() == [False] * 4
    # a model reads a sentence from min_model_words words ("Zorblings ruin towns." has 3)
    short = _evidence(["Zorblings ruin towns."])
    assert decide(short, replace(RULE, shipped=0.9, min_model_words=3))[2].tolist() == [True]
    assert decide(short, replace(RULE, shipped=0.9, min_model_words=4))[2].tolist() == [False]


def test_calibration_takes_the_lowest_threshold_that_keeps_clean_text_in_bounds() -> None:
    web = _evidence([WEATHER, CALM, f"{CALM} {CALM[:-1]} again."])
    chosen, shares = calibrate({"web": web}, RULE, bounds={"web": 0.0}, thresholds=(0.5, 0.7, 0.99))
    assert chosen is not None and chosen.shipped == 0.7  # 0.5 flags the weather page
    assert shares == {"web": 0.0}
    loose, _ = calibrate({"web": web}, RULE, bounds={"web": 0.34}, thresholds=(0.5, 0.7))
    assert loose is not None and loose.shipped == 0.5  # one page of three is within 0.34
    none, shares = calibrate({"web": _evidence([HOSTILE])}, RULE, bounds={"web": 0.0},
                             thresholds=(0.5, 0.9))  # fmt: skip
    assert none is None and shares == {"web": 1.0}
    toxic = {"threads": _evidence([f"{HOSTILE} {HOSTILE[:-1]} again.", CALM])}
    result = run_fold(toxic, {"web": web}, RULE, bounds={"web": 0.0}, thresholds=(0.5, 0.7))
    assert result.recall == {"threads": 0.5} and result.thresholds.shipped == 0.7  # type: ignore[union-attr]


def _fold(*recalls: float) -> FoldResult:
    return FoldResult(Thresholds(), {f"set{i}": r for i, r in enumerate(recalls)}, {})


def test_choose_maximises_the_worst_held_out_set_then_the_mean() -> None:
    results = {
        # rule 0 is great on one source and blind on the other; rule 1 holds on both
        "a": {"f1": [_fold(0.95), _fold(0.6)], "f2": [_fold(0.1), _fold(0.5)]},
        "b": {"f1": [_fold(0.7), _fold(0.5)], "f2": [_fold(0.5, 0.9), _fold(0.5)]},
    }
    assert choose(results) == ("b", 0, 0.5, 0.7)  # a/1 and b/0 tie at 0.5; b/0's mean is higher
    assert choose({"a": results["a"]})[:2] == ("a", 1)
    with pytest.raises(ValueError):
        choose({})


def test_rules_and_card_settings_round_trip() -> None:
    grid = rules()
    assert len(grid) == 3 * 3 * 3 * 4 * 2 and all(r.shipped is None for r in grid)
    settings = {"shipped_threshold": 0.9, "sentence_threshold": 0.5, "identity_threshold": 0.3,
                "max_toxic_share": 0.06, "min_toxic_sentences": 3, "min_model_words": 4}  # fmt: skip
    assert settings_of(rule_of(settings)) == settings
    # the filter decides with the same thresholds its config names
    assert ToxicityFilter.thresholds_of(ToxicityConfig(**settings)) == replace(
        rule_of(settings), own=0.5, own_reported=0.9
    )
