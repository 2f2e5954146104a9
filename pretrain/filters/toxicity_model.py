"""The toxicity model shipped inside the package: a quantized fastText classifier of sentences.

``scripts/train_toxicity_model.py`` builds it at development time from labelled data whose
licences let a trained model ship (Stormfront CC BY-SA 3.0 ES, Davidson MIT, HateCheck CC BY
4.0, ToxiGen seed statements CDLA-Permissive-2.0, English Wikipedia CC BY-SA 3.0 as clean
prose, and our own neutral sentences about groups; see ``NOTICE`` at the repository root). The
file carries the share-alike licence of its data: CC BY-SA 3.0. The product reads only the
files next to this module, lazily (the first filter that uses the model loads it, once per
process):

- ``models/<version>.ftz``: the fastText sentence model (labels ``__label__toxic`` /
  ``__label__clean``, input as :func:`pretrain.filters.toxicity_classifier.to_line` writes it);
- ``models/<version>.json``: its card (version, languages, licence, the sha256 and size of the
  model file, the training data's files, hashes, licences and row counts, the thresholds, how
  they were chosen: leave-one-source-out recall per source and the calibration's false
  positives).

toxicity-v3's model of whole documents is gone: it learned the style of its training sources
(tweets and forum posts against encyclopedias and books) and flagged shop pages, coupons and
sports logs it had never seen; toxicity-v4 judges sentences only.

The version names the file: a new model is a new version, and the version is part of the
filter stage's code version (``pretrain_assets/filter.py``), so a new model makes every
filtered shard stale. A model file whose hash does not match its card is refused::

    from pretrain.filters.toxicity_model import VERSION, load_shipped, model_card
    model = load_shipped(VERSION)
    model.probabilities(["Have a nice day.", "They should all be sent back where they came from."])
    model_card(VERSION)["languages"]  # ['en']
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from pretrain.errors import ConfigError

VERSION = "toxicity-v4"  # the model the filter uses by default (ToxicityConfig.shipped_model)
MODELS_DIR = Path(__file__).resolve().parent / "models"
THRESHOLDS = ("shipped_threshold", "sentence_threshold", "identity_threshold",
              "max_toxic_share", "min_toxic_sentences")  # fmt: skip


def available_versions() -> tuple[str, ...]:
    """The versions whose model file and card are both shipped."""
    return tuple(
        sorted(p.stem for p in MODELS_DIR.glob("*.json") if p.with_suffix(".ftz").exists())
    )


def model_card(version: str = VERSION) -> dict[str, Any]:
    """The card of a shipped model (what it was trained on, its licence, its thresholds)."""
    path = MODELS_DIR / f"{version}.json"
    if not path.exists():
        raise ConfigError(
            f"no shipped toxicity model {version!r} (have {available_versions()}): "
            "set ToxicityConfig(shipped_model=...) to one of them, or None to use none"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def _checked(path: Path, expected: str) -> Path:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        raise ConfigError(
            f"{path}: sha256 {digest[:12]}... differs from its card ({expected[:12]}...): "
            "a changed model must get a new version (scripts/train_toxicity_model.py --version)"
        )
    return path


@functools.cache
def load_shipped(version: str = VERSION) -> ShippedModel:
    """The shipped model of ``version``, checked against its card's sha256 (loaded once)."""
    card = model_card(version)
    import fasttext  # heavy native import, kept lazy

    path = _checked(MODELS_DIR / f"{version}.ftz", card["sha256"])
    return ShippedModel(fasttext.load_model(str(path)), card)


class ShippedModel:
    """``probabilities(texts)``: P(toxic) per sentence; ``languages``: what it was trained on
    (the filter never lets it read another language)."""

    def __init__(self, model: Any, card: dict[str, Any]) -> None:
        from pretrain.filters.toxicity_classifier import ToxicityClassifier

        self._classifier = ToxicityClassifier(model)
        self.card = card
        self.version: str = card["version"]
        self.languages: tuple[str, ...] = tuple(card["languages"])

    def probabilities(self, texts: list[str]) -> list[float]:
        return self._classifier.probabilities(texts)

    def probabilities_of_words(self, words: list[list[str]]) -> list[float]:
        return self._classifier.probabilities_of_words(words)
