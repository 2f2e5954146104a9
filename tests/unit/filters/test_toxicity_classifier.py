"""The fastText toxicity classifier trained on a user's labels, and the filter using it.

The labelled text is our own (``tests/helpers/toxicity_labels.py``): hostility against an
invented group, which neither the shipped profanity model nor the word lists know.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pretrain.errors import ConfigError, DataError
from pretrain.filters.profanity_model import sentence_probabilities
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
from pretrain.filters.toxicity_classifier import (
    ToxicityClassifier,
    ToxicityClassifierConfig,
    train_toxicity_classifier,
)
from tests.helpers.toxicity_labels import CALM, THINGS, labelled_rows, write_labels


def test_trains_on_labels_and_the_filter_flags_what_it_learned(tmp_path: Path) -> None:
    labels = write_labels(tmp_path / "labels.jsonl.gz", labelled_rows())
    out = str(tmp_path / "model")
    stats = train_toxicity_classifier(out, ToxicityClassifierConfig(labelled_uris=(labels,)))
    assert (stats.toxic, stats.clean, stats.unlabelled) == (45, 40, 0) and stats.skipped is None
    assert stats.heldout_examples > 5 and stats.heldout_recall >= 0.9
    assert json.loads((tmp_path / "model" / "meta.json").read_text())["stats"]["toxic"] == 45
    unseen = ["The zorblings will blight this whole valley.", "The bakery sells fresh bread."]
    toxic, calm = ToxicityClassifier.load(out).probabilities(unseen)
    assert toxic >= 0.5 > calm
    text = " ".join(c.format(thing=t) for c, t in zip(CALM * 2, THINGS * 2, strict=False))
    doc = {"text": text + " " + unseen[0] + " Keep the zorblings away, they blight all.",
           "language": "en"}  # fmt: skip
    assert max(sentence_probabilities(unseen[:1])) < 0.5  # the shipped model does not know it
    assert ToxicityFilter().check(dict(doc)) is None
    rule = ToxicityFilter(ToxicityConfig(classifier_uri=out, min_toxic_sentences=2))  # 2 here
    assert rule.check(doc)[0] == "toxic_content" and doc["toxicity_score"] == pytest.approx(2 / 12)
    # a language the classifier is not trained for is not scored by it
    assert rule.check({"text": doc["text"], "language": "fr"}) is None


def test_labels_are_read_strictly_and_counted(tmp_path: Path) -> None:
    rows = labelled_rows()
    mixed = [{**r, "toxic": ("toxic" if r["toxic"] else 0)} for r in rows]
    mixed += [{"text": "No label on this one.", "toxic": None}]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in mixed) + "{not json\n")
    stats = train_toxicity_classifier(
        str(tmp_path / "m"), ToxicityClassifierConfig(labelled_uris=(str(path),))
    )
    assert (stats.toxic, stats.clean, stats.unlabelled, stats.unreadable) == (45, 40, 1, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "Hm.", "toxic": "maybe"}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl record 1: label 'maybe'"):
        train_toxicity_classifier(
            str(tmp_path / "b"), ToxicityClassifierConfig(labelled_uris=(str(bad),))
        )
    with pytest.raises(DataError, match="no 'hate' field"):
        train_toxicity_classifier(
            str(tmp_path / "c"),
            ToxicityClassifierConfig(labelled_uris=(str(path),), label_field="hate"),
        )


def test_without_labels_nothing_is_trained_and_the_filter_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "model"
    labels = write_labels(tmp_path / "l.jsonl.gz", labelled_rows())
    train_toxicity_classifier(str(out), ToxicityClassifierConfig(labelled_uris=(labels,)))
    assert (out / "model.bin").exists()
    stats = train_toxicity_classifier(str(out), ToxicityClassifierConfig())
    assert stats.skipped and "no labelled_uris" in stats.skipped
    assert not (out / "model.bin").exists()  # the earlier model is not picked up
    assert ToxicityClassifier.load(str(out)) is None
    rule = ToxicityFilter(ToxicityConfig(classifier_uri=str(out)))
    assert (
        rule.classifier is None and rule.check({"text": "Calm. Quiet.", "language": "en"}) is None
    )
    few = write_labels(tmp_path / "few.jsonl.gz", labelled_rows()[:30])
    assert (
        "need 20 of each"
        in train_toxicity_classifier(
            str(out), ToxicityClassifierConfig(labelled_uris=(few,))
        ).skipped
    )


def test_divergent_training_says_what_to_change(tmp_path: Path) -> None:
    labels = write_labels(tmp_path / "labels.jsonl.gz", labelled_rows())
    config = ToxicityClassifierConfig(labelled_uris=(labels,), lr=1000.0, bucket=10)
    with pytest.raises(
        ConfigError,
        match=r"diverged \(NaN\) at lr=1000.0, bucket=10: lower lr",
    ):
        train_toxicity_classifier(str(tmp_path / "m"), config)
    assert not (tmp_path / "m" / "model.bin").exists()
