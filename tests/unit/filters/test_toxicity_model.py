"""The toxicity model shipped in the package: its card, its use by default, how it combines.

Sentences here are our own. The model file is the real one from ``pretrain/filters/models``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import fields
from dataclasses import replace as replace_config
from pathlib import Path

import pytest

from pretrain.errors import ConfigError
from pretrain.filters import toxicity_model
from pretrain.filters.profanity_model import sentence_probabilities
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
from pretrain.filters.toxicity_classifier import ToxicityClassifierConfig, train_toxicity_classifier
from pretrain.filters.toxicity_model import (
    MODELS_DIR,
    VERSION,
    available_versions,
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
    # no file the package ships is over 2 MB (toxicity-v3's document model was 3.0 MB)
    assert all(p.stat().st_size < 2_000_000 for p in MODELS_DIR.iterdir())
    assert "CC BY-SA 3.0" in card["licence"]
    notice = (ROOT / "NOTICE").read_text(encoding="utf-8")
    for data in card["training_data"]:  # every training set is attributed in NOTICE
        assert data["licence"] and data["file"].split("_")[0].lower() in notice.lower()
    # the filter's defaults are the thresholds the leave-one-source-out selection chose
    defaults = {f.name: f.default for f in fields(ToxicityConfig)}
    assert defaults["shipped_model"] == VERSION
    for name, value in card["thresholds"].items():
        assert defaults[name] == value, name
    # the card says how it was chosen: every fold's held-out recall, every family tried
    shipped = card["selection"]["shipped"]
    assert shipped["recipe"] == card["recipe"]["name"] in card["selection"]["recipes"]
    assert set(shipped["folds"]) == {"stormfront", "davidson", "hatecheck", "toxigen", "implicit"}
    recalls = [v for fold in shipped["folds"].values() for v in fold["recall"].values()]
    assert shipped["worst"] == min(recalls)
    assert len(card["selection"]["recipes"]) >= 2  # fastText and another family
    assert all(share <= card["selection"]["bounds"][name]
               for name, share in card["calibration"].items())  # fmt: skip


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


def test_a_readme_with_badges_and_links_passes() -> None:
    assert ToxicityFilter().check(_doc(README * 3)) is None  # badges and links are no sign of hate


def test_a_model_file_that_differs_from_its_card_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (f"{VERSION}.ftz", f"{VERSION}.json"):
        (tmp_path / name).write_bytes((MODELS_DIR / name).read_bytes())
    monkeypatch.setattr(toxicity_model, "MODELS_DIR", tmp_path)
    assert load_shipped.__wrapped__(VERSION).version == VERSION  # an exact copy loads
    changed = bytearray((tmp_path / f"{VERSION}.ftz").read_bytes())
    changed[-1] ^= 0xFF
    (tmp_path / f"{VERSION}.ftz").write_bytes(bytes(changed))
    with pytest.raises(ConfigError, match="differs from its card.*new version"):
        load_shipped.__wrapped__(VERSION)


def test_the_model_is_loaded_lazily() -> None:
    """Importing the filter or building its config reads no model (Dagster imports the
    definitions often); the first filter built loads it."""
    code = (
        "import sys\n"
        "from pretrain.filters.toxicity import ToxicityConfig\n"
        "ToxicityConfig()\n"
        "assert 'fasttext' not in sys.modules, 'fasttext imported'\n"
        "from pretrain.filters.toxicity import ToxicityFilter\n"
        "ToxicityFilter()\n"
        "assert 'fasttext' in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
