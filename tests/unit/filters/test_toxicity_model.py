"""The toxicity model shipped in the package: its card, its use by default, how it combines.

Sentences here are our own. The model file is the real one from ``pretrain/filters/models``.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import fields
from dataclasses import replace as replace_config
from pathlib import Path

import pytest

from pretrain.errors import ConfigError
from pretrain.fasttext_models import train_supervised
from pretrain.filters.profanity_model import sentence_probabilities
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
from pretrain.filters.toxicity_classifier import ToxicityClassifierConfig, train_toxicity_classifier
from pretrain.filters.toxicity_model import (
    MODELS_DIR,
    VERSION,
    ShippedModel,
    available_versions,
    document_line,
    load_shipped,
    model_card,
)
from tests.helpers.toxicity_labels import labelled_rows, write_labels

ROOT = Path(__file__).resolve().parents[3]
IMPLICIT = [  # no slur, no profanity: the profanity model gives them 0.01-0.30
    "Those people should all be sent back to where they came from.",
    "Immigrants bring nothing but crime and disease to our towns.",
    "Muslims are all terrorists waiting for their chance.",
]
CALM = [
    "The library opened a new reading room on the second floor last spring.",
    "Volunteers run a reading group there on Tuesday evenings.",
    "The council voted to repair the old bridge over the river.",
]


def _doc(text: str, language: str | None = "en") -> dict:
    return {"text": text, "language": language}


def test_the_shipped_model_and_its_card() -> None:
    assert VERSION in available_versions()
    card = model_card()
    path = MODELS_DIR / f"{VERSION}.ftz"
    assert card["version"] == VERSION and card["languages"] == ["en"]
    assert card["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert path.stat().st_size == card["bytes"] < 2_000_000  # a quantized model, not 400 MB
    document = MODELS_DIR / card["document"]["file"]  # the model of whole threads and pages
    assert card["document"]["sha256"] == hashlib.sha256(document.read_bytes()).hexdigest()
    assert document.stat().st_size == card["document"]["bytes"] < 4_000_000
    assert load_shipped().has_document_model
    assert "CC BY-SA 3.0" in card["licence"]
    notice = (ROOT / "NOTICE").read_text(encoding="utf-8")
    for data in card["training_data"]:  # every training set is attributed in NOTICE
        assert data["licence"] and data["file"].split("_")[0].lower() in notice.lower()
    # the filter's defaults are the thresholds calibrated on the dev split
    defaults = {f.name: f.default for f in fields(ToxicityConfig)}
    assert defaults["shipped_model"] == VERSION
    for name, value in card["thresholds"].items():
        assert defaults[name] == value, name


def test_the_shipped_model_scores_implicit_hate_above_calm_prose() -> None:
    model = load_shipped()
    hostile, calm = model.probabilities(IMPLICIT), model.probabilities(CALM)
    assert max(calm) < 0.1
    assert min(hostile) >= model_card()["thresholds"]["shipped_threshold"]
    assert max(sentence_probabilities(IMPLICIT)) < 0.5  # what the profanity model alone misses


def test_used_by_default_and_a_thread_of_implicit_hate_is_dropped() -> None:
    rule = ToxicityFilter()
    assert rule.shipped is not None and rule.shipped.version == VERSION
    thread = _doc("\n\n".join(CALM + IMPLICIT))
    assert rule.check(thread)[0] == "toxic_content"
    without = ToxicityFilter(ToxicityConfig(shipped_model=None))
    assert without.shipped is None and without.check(_doc(thread["text"])) is None
    assert rule.check(_doc(" ".join(CALM * 3))) is None


def test_reporting_is_not_endorsing() -> None:
    report = (
        "A man was charged on Tuesday with threatening to kill a congresswoman, prosecutors "
        "said. According to the complaint, he left a voicemail saying that she would die like "
        "a dog. In one voicemail he said he would slit her throat. Capitol Police said the "
        "suspect had sent more than 40 threatening messages. "
        "His lawyer said he would plead not guilty. The hearing is set for next month."
    )
    rule = ToxicityFilter()
    doc = _doc(report)
    assert rule.check(doc) is None and doc["toxicity_score"] == 0.0
    plain = ToxicityFilter(ToxicityConfig(reported_threshold=None))
    doc = _doc(report)
    plain.score_batch([doc])
    assert doc["toxicity_score"] == 2 / 6  # the profanity model reads "kill", "slit her throat"
    two = ToxicityFilter(ToxicityConfig(reported_threshold=None, min_toxic_sentences=2))
    assert two.check(_doc(report))[0] == "toxic_content"


def test_a_language_no_model_covers_is_unscored_not_clean() -> None:
    rule = ToxicityFilter()
    swedish = _doc("Biblioteket har öppnat en ny läsesal. Volontärer driver en läsecirkel.", "sv")
    assert rule.check(swedish) is None and rule.unscored(swedish)
    assert swedish["toxicity_score"] is None  # not 0.0: nothing scored it
    german = _doc("Du bist ein Arschloch. Halt die Klappe, du Wichser. Guten Tag.", "de")
    assert rule.check(german)[0] == "toxic_content" and rule.unscored(german)
    assert german["toxicity_score"] == 1.0  # the word list still flags ("Guten Tag" is short)
    english = _doc(" ".join(CALM))
    assert rule.check(english) is None and not rule.unscored(english)
    assert english["toxicity_score"] == 0.0


def test_own_classifier_combines_with_or_replaces_the_shipped_model(tmp_path: Path) -> None:
    labels = write_labels(tmp_path / "labels.jsonl.gz", labelled_rows())
    own = str(tmp_path / "own")
    train_toxicity_classifier(own, ToxicityClassifierConfig(labelled_uris=(labels,)))
    invented = (  # two of the labelled sentences: the user's model knows them best
        "The zorblings ruin every town they move into. "
        "Every zorbling is a parasite that will poison our children."
    )
    implicit = _doc("\n\n".join(CALM + IMPLICIT))
    # profanity model off and a strict bar for the user's model, to see which model decides
    config = ToxicityConfig(
        classifier_uri=own, model=None, classifier_threshold=0.93, min_toxic_sentences=2
    )
    combine = ToxicityFilter(config)
    assert combine.shipped is not None and combine.classifier is not None
    assert combine.check(_doc(" ".join(CALM) + " " + invented))[0] == "toxic_content"
    assert combine.check(dict(implicit))[0] == "toxic_content"
    replace = ToxicityFilter(replace_config(config, own_model="replace"))
    assert replace.shipped is None  # the user's model takes the shipped one's place
    assert replace.check(_doc(" ".join(CALM) + " " + invented))[0] == "toxic_content"
    assert replace.check(dict(implicit)) is None  # only the shipped model knew this
    skipped = str(tmp_path / "skipped")
    train_toxicity_classifier(skipped, ToxicityClassifierConfig())  # no labels: no model
    kept = ToxicityFilter(ToxicityConfig(classifier_uri=skipped, own_model="replace"))
    assert kept.shipped is not None  # nothing to replace it with


def test_config_names_what_to_fix() -> None:
    with pytest.raises(ConfigError, match="shipped_model='toxicity-v0'.*or None"):
        ToxicityConfig(shipped_model="toxicity-v0")
    with pytest.raises(ConfigError, match="own_model='merge'.*combine"):
        ToxicityConfig(own_model="merge")
    with pytest.raises(ConfigError, match="shipped_threshold"):
        ToxicityConfig(shipped_threshold=0.0)
    with pytest.raises(ConfigError, match="min_model_words"):
        ToxicityConfig(min_model_words=0)


def _tiny_shipped(tmp_path: Path) -> ShippedModel:
    """A shipped-model pair trained here on invented words (real fastText models): the
    sentence model knows "zorblings" as hostile, the document model "quux" threads as toxic."""
    rng = random.Random(0)
    hostile = ["zorblings ruin every town", "zorblings are parasites", "zorblings poison wells"]
    calm = ["the library opened a room", "volunteers read on tuesday", "greetings comrades quux"]
    sentences = [f"__label__toxic {rng.choice(hostile)} w{i % 9}" for i in range(60)]
    sentences += [f"__label__clean {rng.choice(calm)} w{i % 9}" for i in range(60)]
    threads = [
        f"__label__toxic greetings comrades quux forum thread quux w{i % 7}" for i in range(60)
    ]
    threads += [
        f"__label__clean the council voted to repair the bridge w{i % 7}" for i in range(60)
    ]
    settings = {"epoch": 20, "lr": 0.5, "dim": 8, "word_ngrams": 1, "seed": 0}
    sentence = train_supervised(sentences, str(tmp_path / "s.bin"), **settings)
    document = train_supervised(threads, str(tmp_path / "d.bin"), **settings)
    return ShippedModel(sentence, {"version": "tiny", "languages": ["en"]}, document)


def test_the_document_model_drops_a_thread_with_evidence_in_its_sentences(tmp_path: Path) -> None:
    shipped = _tiny_shipped(tmp_path)
    forum = "\n\n".join(["Greetings comrades, this quux forum thread goes on."] * 4
                        + ["Greetings comrades, quux thread number two here."] * 4)  # fmt: skip
    hostile = forum + "\n\nThe zorblings ruin every town they enter."
    # the sentence rule alone never drops these (one hostile sentence of nine, three needed)
    config = ToxicityConfig(model=None, document_threshold=0.8, document_evidence_threshold=0.6)
    rule = ToxicityFilter(config, shipped=shipped)
    rejected = rule.check(_doc(hostile))
    assert rejected is not None and rejected[1].startswith("document model "), rejected
    assert float(rejected[1].split()[2]) >= 0.8 and "with 1 sentences of evidence" in rejected[1]
    # no sentence is evidence: the document model alone (its style of text) drops nothing
    assert rule.check(_doc(forum)) is None
    assert rule.check(_doc("The council voted to repair the old bridge over the river.")) is None
    # off, or a language it was not trained for: not used
    off = ToxicityFilter(replace_config(config, document_threshold=None), shipped=shipped)
    assert off.check(_doc(hostile)) is None
    french = _doc(hostile, "fr")
    assert rule.check(french) is None and rule.unscored(french)
    # the evidence bar: a sentence under the sentence threshold but over the evidence bar counts
    strict = replace_config(config, shipped_threshold=0.999, document_evidence_threshold=0.5)
    assert ToxicityFilter(strict, shipped=shipped).check(_doc(hostile)) is not None
    assert (
        ToxicityFilter(
            replace_config(strict, document_evidence_threshold=0.999), shipped=shipped
        ).check(_doc(hostile))
        is None
    )


def test_a_document_scored_as_not_decidable_is_read_when_checked(tmp_path: Path) -> None:
    """The filter stage scores its rejects without deciding them: the document model skips
    them then; a later ``check`` of such a document reads it and decides as usual."""
    shipped = _tiny_shipped(tmp_path)
    hostile = "\n\n".join(["Greetings comrades, this quux forum thread goes on."] * 8
                          + ["The zorblings ruin every town they enter."])  # fmt: skip
    config = ToxicityConfig(model=None, document_threshold=0.8, document_evidence_threshold=0.6)
    rule = ToxicityFilter(config, shipped=shipped)
    read, skipped = _doc(hostile), _doc(hostile)
    # distinct sentences: the repeated post once, the hostile one flagged
    assert rule.score_batch([read, skipped], decidable=[True, False]) == [0.5, 0.5]
    assert isinstance(read["_toxicity"][6], float)  # the document model's probability
    assert not isinstance(skipped["_toxicity"][6], float | None)  # not read yet
    assert rule.check(skipped) == rule.check(read) and rule.check(read) is not None


README = """# quietpkg

[![PyPI version](https://img.shields.io/pypi/v/quietpkg.svg)](https://pypi.org/project/quietpkg/)
[![CI](https://github.com/example/quietpkg/actions/workflows/ci.yml/badge.svg)](https://github.com/example/quietpkg/actions)
<p align="center"><img width="300" src="https://raw.githubusercontent.com/example/quietpkg/main/logo.png"></p>

quietpkg reads configuration files and reports the keys that no code reads any more.
Install it with pip and run it in the root of your project. Questions go to dev@example.org.

## Usage

Run quietpkg scan to list unused keys. See https://quietpkg.example.org/docs for the options.
Contributions are welcome: open an issue at https://github.com/example/quietpkg/issues first.
"""


def test_document_line_drops_links_and_markup_and_a_readme_passes() -> None:
    line = document_line('See <a href="https://x.org/a">the docs</a> or www.x.org, ann@x.org.')
    assert line == "see the docs or"
    assert ToxicityFilter().check(_doc(README * 3)) is None  # badges and links are no sign of hate
