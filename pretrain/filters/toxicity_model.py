"""The toxicity model shipped inside the package: quantized fastText classifiers of sentences
and of whole documents.

``scripts/train_toxicity_model.py`` builds it at development time from labelled data whose
licences let a trained model ship (Stormfront CC BY-SA 3.0 ES, Davidson MIT, HateCheck CC BY
4.0, ToxiGen seed statements CDLA-Permissive-2.0, English Wikipedia CC BY-SA 3.0 as clean
prose, Project Gutenberg books as clean prose for the document model, and our own neutral
sentences about groups; see ``NOTICE`` at the repository root). The files carry the
share-alike licence of their data: CC BY-SA 3.0. The product reads only the files next to
this module:

- ``models/<version>.ftz``: the fastText sentence model (labels ``__label__toxic`` /
  ``__label__clean``, input as :func:`pretrain.filters.toxicity_classifier.to_line` writes it);
- ``models/<version>.document.ftz`` (toxicity-v3 on): the model of whole documents (threads,
  pages, statements), named with its sha256 in the card's ``document`` entry;
- ``models/<version>.json``: its card (version, languages, licence, the sha256 of the model
  file, the training data's files, hashes and counts, the thresholds calibrated on the
  development split and the held-out numbers).

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
import re
from pathlib import Path
from typing import Any

from pretrain.errors import ConfigError

VERSION = "toxicity-v3"  # the model the filter uses by default (ToxicityConfig.shipped_model)
MODELS_DIR = Path(__file__).resolve().parent / "models"
# What the document model never sees: links, e-mail addresses and markup. Forum posts link news
# while encyclopedias and books do not, so a model that saw them learned "links = hate" and
# read a package's README (badges, image links) as a hate thread.
_NOT_PROSE = re.compile(r"(?:https?|ftp)://\S+|www\.\S+|\S+@\S+\.\w+|<[^>]{0,500}>")


def document_line(text: str) -> str:
    """The document model's input: the text without links and markup, as ``to_line`` words."""
    from pretrain.filters.toxicity_classifier import to_line

    return to_line(_NOT_PROSE.sub(" ", text))


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

    sentences = fasttext.load_model(str(_checked(MODELS_DIR / f"{version}.ftz", card["sha256"])))
    document = None
    if "document" in card:  # toxicity-v3 on: a second model that reads whole documents
        path = _checked(MODELS_DIR / card["document"]["file"], card["document"]["sha256"])
        document = fasttext.load_model(str(path))
    return ShippedModel(sentences, card, document)


class ShippedModel:
    """``probabilities(texts)``: P(toxic) per sentence; ``document_probabilities(texts)``: per
    whole document (a thread, a page), when the version has a document model;
    ``languages``: what it was trained on."""

    def __init__(self, model: Any, card: dict[str, Any], document: Any = None) -> None:
        from pretrain.filters.toxicity_classifier import ToxicityClassifier

        self._classifier = ToxicityClassifier(model)
        self._document = None if document is None else ToxicityClassifier(document)
        self.card = card
        self.version: str = card["version"]
        self.languages: tuple[str, ...] = tuple(card["languages"])

    @property
    def has_document_model(self) -> bool:
        return self._document is not None

    def probabilities(self, texts: list[str]) -> list[float]:
        return self._classifier.probabilities(texts)

    def probabilities_of_words(self, words: list[list[str]]) -> list[float]:
        return self._classifier.probabilities_of_words(words)

    def document_probabilities(self, texts: list[str]) -> list[float]:
        if self._document is None:
            raise ConfigError(f"shipped model {self.version} has no document model")
        return self._document.probabilities_of_lines([document_line(t) for t in texts])
