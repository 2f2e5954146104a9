"""A fastText toxicity classifier trained on your own labelled text (the ``toxicity`` stage).

The shipped profanity model and the word lists know insults and slurs; hate in your domain
(a forum's coded language, another language, another kind of abuse) needs examples. Give
labelled files (JSONL or Parquet, any of the readers' compressions): each record has a
``text`` and a label field (``toxic`` by default) that is true/false, 1/0 or
``"toxic"``/``"clean"``; records whose label is null are counted and left out, any other
label value is an error that names the file and the value. Records are best short units
(sentences, comments, posts): the filter scores sentences. The minority class is repeated
until both classes weigh the same, a seeded fifth is held out, and training is deterministic
(one fastText thread, fixed seed)::

    from pretrain.filters.toxicity_classifier import (
        ToxicityClassifier, ToxicityClassifierConfig, train_toxicity_classifier)
    stats = train_toxicity_classifier(
        ".pretrain/artifacts/toxicity_classifier",
        ToxicityClassifierConfig(labelled_uris=("/data/forum_labels.jsonl.gz",)),
    )
    stats.heldout_recall, stats.heldout_precision  # e.g. 0.81, 0.74
    ToxicityClassifier.load(".pretrain/artifacts/toxicity_classifier").probabilities(
        ["a calm sentence"])  # [0.02]

Output folder: ``model.bin`` and ``meta.json`` (config, counts, held-out metrics). Without
labelled files (the default) nothing is trained: ``meta.json`` says so, and the filter uses
the shipped model and the word lists alone (``ToxicityConfig.classifier_uri``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

from pretrain import storage
from pretrain.data.readers import RawFile, is_reject, iter_records, kind_for
from pretrain.errors import ConfigError, DataError
from pretrain.fasttext_models import load_supervised, train_supervised
from pretrain.settings import check_types

TOXIC, CLEAN = "__label__toxic", "__label__clean"
MIN_PER_CLASS = 20
_TRUE = frozenset({"true", "1", "toxic", "yes"})
_FALSE = frozenset({"false", "0", "clean", "no"})
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, kw_only=True)
class ToxicityClassifierConfig:
    labelled_uris: tuple[str, ...] = ()  # JSONL/Parquet files of labelled text; () trains nothing
    label_field: str = "toxic"  # true/false, 1/0 or "toxic"/"clean"; null rows are left out
    max_chars: int = 2000  # longer records are cut (the filter scores sentences)
    heldout_fraction: float = 0.2
    epochs: int = 25
    lr: float = 0.5
    dim: int = 20
    word_ngrams: int = 2
    bucket: int = 500_000  # hashed word-pair slots: 43 MB at dim 20 (fastText default: 2M)
    seed: int = 0
    min_heldout_recall: float = 0.5  # asset-check bound (a warning)

    def __post_init__(self) -> None:
        check_types(self)
        if isinstance(self.labelled_uris, str):
            raise ConfigError(f"labelled_uris={self.labelled_uris!r}: use a list of files")
        if not 0.0 < self.heldout_fraction < 0.5:
            raise ConfigError(f"heldout_fraction={self.heldout_fraction}: use (0, 0.5)")
        if self.max_chars < 20 or min(self.epochs, self.dim, self.bucket) < 1:
            raise ConfigError("need max_chars >= 20 and epochs, dim and bucket >= 1")


@dataclass(frozen=True, kw_only=True)
class ToxicityClassifierStats:
    toxic: int  # labelled examples read, per class
    clean: int
    unlabelled: int  # records whose label was null
    unreadable: int  # records the readers rejected (bad JSON, damaged compression, ...)
    heldout_examples: int
    heldout_precision: float  # of the toxic class, at probability 0.5
    heldout_recall: float
    skipped: str | None = None  # why no model was trained

    def as_metadata(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class _Counts(TypedDict):
    """The record counts of :class:`ToxicityClassifierStats`."""

    toxic: int
    clean: int
    unlabelled: int
    unreadable: int


def words_of(text: str) -> list[str]:
    """The lower-cased word tokens that the toxicity models read (punctuation dropped)."""
    return _WORD.findall(text.lower())


def to_line(text: str) -> str:
    """fastText input: lower-cased word tokens on one line."""
    return " ".join(words_of(text))


def _label(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise DataError(f"{where}: label {value!r} is not true/false, 1/0 or 'toxic'/'clean'")


def read_labelled(config: ToxicityClassifierConfig) -> tuple[list[tuple[bool, str]], int, int]:
    """((toxic?, text) examples, unlabelled count, unreadable count) from ``labelled_uris``."""
    examples: list[tuple[bool, str]] = []
    unlabelled = unreadable = 0
    for uri in config.labelled_uris:
        kind = kind_for(uri)
        if kind not in ("jsonl", "parquet"):
            raise ConfigError(f"labelled file {uri}: use JSONL or Parquet records")
        for n, record in enumerate(iter_records(RawFile(uri=uri, source="labelled", kind=kind))):
            if is_reject(record):
                unreadable += 1
                continue
            fields = json.loads(record.get("metadata") or "{}")
            if config.label_field not in fields:
                raise DataError(f"{uri} record {n + 1}: no {config.label_field!r} field")
            label = _label(fields[config.label_field], f"{uri} record {n + 1}")
            text = (record.get("text") or "")[: config.max_chars]
            if label is None or not to_line(text):
                unlabelled += 1
                continue
            examples.append((label, text))
    return examples, unlabelled, unreadable


def _held_out(text: str, config: ToxicityClassifierConfig) -> bool:
    digest = hashlib.blake2b(f"{config.seed}\x00{text}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") < config.heldout_fraction * 2**32


def train_toxicity_classifier(
    output_dir_uri: str, config: ToxicityClassifierConfig
) -> ToxicityClassifierStats:
    """Read the labelled files, train on four fifths, measure on the rest, save the model.

    Without labelled files or with fewer than 20 examples of a class: no model.bin, a
    meta.json whose ``skipped`` says why (an earlier model is removed), stats with ``skipped``.
    """
    examples, unlabelled, unreadable = read_labelled(config)
    toxic = sum(label for label, _ in examples)
    counts: _Counts = {
        "toxic": toxic,
        "clean": len(examples) - toxic,
        "unlabelled": unlabelled,
        "unreadable": unreadable,
    }
    if min(counts["toxic"], counts["clean"]) < MIN_PER_CLASS:
        reason = (
            "no labelled_uris given"
            if not config.labelled_uris
            else f"{counts['toxic']} toxic and {counts['clean']} clean examples "
            f"(need {MIN_PER_CLASS} of each)"
        )
        return _skip(reason, output_dir_uri, config, counts)
    train = [(t, x) for t, x in examples if not _held_out(x, config)]
    held = [(t, x) for t, x in examples if _held_out(x, config)]
    model = train_supervised(
        (f"{TOXIC if t else CLEAN} {to_line(x)}" for t, x in _balanced(train, config.seed)),
        storage.join(output_dir_uri, "model.bin"),
        epoch=config.epochs, lr=config.lr, dim=config.dim, word_ngrams=config.word_ngrams,
        seed=config.seed, bucket=config.bucket,
    )  # fmt: skip
    predicted = [p >= 0.5 for p in ToxicityClassifier(model).probabilities([x for _, x in held])]
    truth = [t for t, _ in held]
    hits = sum(p and t for p, t in zip(predicted, truth, strict=True))
    stats = ToxicityClassifierStats(
        **counts,
        heldout_examples=len(held),
        heldout_precision=round(hits / max(1, sum(predicted)), 4),
        heldout_recall=round(hits / max(1, sum(truth)), 4),
    )
    storage.write_json(
        {"stats": stats.as_metadata(), "config": asdict(config)},
        storage.join(output_dir_uri, "meta.json"),
    )
    return stats


def _balanced(rows: list[tuple[bool, str]], seed: int) -> list[tuple[bool, str]]:
    """The rows with the smaller class repeated until both classes are the same size."""
    by_class = [[r for r in rows if r[0]], [r for r in rows if not r[0]]]
    small, large = sorted(by_class, key=len)
    out = large + [small[i % len(small)] for i in range(len(large))]
    random.Random(seed).shuffle(out)
    return out


def _skip(
    reason: str, output_dir_uri: str, config: ToxicityClassifierConfig, counts: _Counts
) -> ToxicityClassifierStats:
    message = (
        f"toxicity classifier not trained: {reason}; the filter uses the shipped model and the "
        "word lists (give labelled JSONL/Parquet files in labelled_uris to train one)"
    )
    stale = storage.join(output_dir_uri, "model.bin")
    if storage.exists(stale):  # an earlier model must not be picked up by the filter
        storage.remove(stale)
    storage.write_json(
        {"skipped": message, "config": asdict(config)}, storage.join(output_dir_uri, "meta.json")
    )
    return ToxicityClassifierStats(
        **counts, heldout_examples=0, heldout_precision=0.0, heldout_recall=0.0, skipped=message
    )


class ToxicityClassifier:
    """A trained classifier: ``probabilities(texts)`` is P(toxic) per text."""

    def __init__(self, model: Any) -> None:
        self._model = model

    @classmethod
    def load(cls, dir_uri: str) -> ToxicityClassifier | None:
        """The folder's model, or ``None`` when training was skipped (meta.json says why)."""
        model_uri = storage.join(dir_uri, "model.bin")
        if not storage.exists(model_uri):
            if storage.exists(storage.join(dir_uri, "meta.json")):
                return None
            raise ConfigError(f"{dir_uri}: no toxicity classifier (model.bin or meta.json)")
        return cls(load_supervised(model_uri))

    def probabilities(self, texts: list[str]) -> list[float]:
        return self.probabilities_of_lines([to_line(t) for t in texts])

    def probabilities_of_words(self, words: list[list[str]]) -> list[float]:
        """P(toxic) of sentences already split into words (:func:`words_of`)."""
        return self.probabilities_of_lines([" ".join(w) for w in words])

    def probabilities_of_lines(self, lines: list[str]) -> list[float]:
        """P(toxic) of inputs already in the model's form (one line of words each)."""
        if not lines:
            return []
        labels, probs = self._model.predict(lines, k=2)
        return [
            min(1.0, float(dict(zip(row, p, strict=True)).get(TOXIC, 0.0)))
            for row, p in zip(labels, probs, strict=True)
        ]
