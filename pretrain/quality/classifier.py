"""Train, save, load and apply a DCLM-style fastText quality classifier.

Positives are "reference good" documents: raw-shard documents of ``reference_sources`` and
any ``reference_uris`` (books, encyclopedic or curated text in JSONL/Parquet/text files).
Negatives are random documents of the pool — every other non-code source of the raw shards.
A pool with no such documents (the embedded demo corpus has only code, package docs and
licences) gets *synthetic* negatives: the positives' words shuffled within each document
(word salad keeps the vocabulary but destroys fluency, which word bigrams detect). The
metadata says which kind was used. Long documents are cut into chunks of
``max_chars_per_doc`` at paragraph breaks; samples are chosen by a seeded hash, so training is
deterministic (one fastText thread, fixed seed)::

    from pretrain.quality.classifier import QualityClassifierConfig, train_quality_classifier
    stats = train_quality_classifier(
        [".pretrain/artifacts/raw_shards/web-0000/documents.parquet"],
        ".pretrain/artifacts/quality_classifier",
        QualityClassifierConfig(reference_uris=("/data/books.jsonl.gz",)),
    )
    stats.heldout_accuracy  # e.g. 0.97
    model = QualityModel.load(".pretrain/artifacts/quality_classifier")
    model.score(["Some text ..."])  # [0.93]

Output folder: ``model.bin`` (fastText), ``meta.json`` (config, counts, held-out metrics and
the score quantiles of the negative pool, used for keep-top-fraction thresholds).
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from pretrain import storage
from pretrain.data.readers import RawFile, is_reject, iter_records, kind_for
from pretrain.errors import ConfigError, DataError
from pretrain.fasttext_models import load_supervised, train_supervised
from pretrain.settings import check_types
from pretrain.text import words

POSITIVE, NEGATIVE = "__label__hq", "__label__lq"
MIN_EXAMPLES = 10
QUANTILES = tuple(round(q / 100, 2) for q in range(1, 100))


@dataclass(frozen=True, kw_only=True)
class QualityClassifierConfig:
    reference_sources: tuple[str, ...] = ("prose", "license")  # raw-shard sources taken as good
    reference_uris: tuple[str, ...] = ()  # extra reference files (JSONL/Parquet/text)
    negative_sources: tuple[str, ...] | None = None  # None: every other non-code source
    code_sources: tuple[str, ...] = ("code",)
    negatives: str = "auto"  # "pool", "synthetic", or "auto" (pool if >= min_negatives docs)
    min_negatives: int = 50
    max_docs_per_class: int = 4000
    max_chars_per_doc: int = 4000
    min_chars_per_doc: int = 200
    heldout_fraction: float = 0.2
    epochs: int = 50  # small reference sets need many passes
    lr: float = 1.0
    dim: int = 32
    word_ngrams: int = 2
    seed: int = 0
    # Too little reference text: "skip" writes a meta.json saying why (the filter then uses
    # the heuristic quality_score) instead of a model; "error" raises DataError.
    without_reference: str = "skip"
    min_heldout_accuracy: float = 0.7  # asset-check bound (a warning); 0.82 on the demo corpus

    def __post_init__(self) -> None:
        check_types(self)
        if self.without_reference not in ("skip", "error"):
            raise ConfigError(
                f"without_reference={self.without_reference!r}: use 'skip' or 'error'"
            )
        if self.negatives not in ("auto", "pool", "synthetic"):
            raise ConfigError(f"negatives={self.negatives!r}: use 'auto', 'pool' or 'synthetic'")
        if not 0.0 < self.heldout_fraction < 0.5:
            raise ConfigError(f"heldout_fraction={self.heldout_fraction}: use (0, 0.5)")
        if self.max_docs_per_class < 10 or self.min_chars_per_doc >= self.max_chars_per_doc:
            raise ConfigError("need max_docs_per_class >= 10 and min_chars < max_chars_per_doc")
        if not self.reference_sources and not self.reference_uris:
            raise ConfigError("no reference text: set reference_sources or reference_uris")


@dataclass(frozen=True, kw_only=True)
class QualityClassifierStats:
    positives: int
    negatives: int
    negative_kind: str
    heldout_accuracy: float
    heldout_precision: float
    heldout_recall: float
    heldout_docs: int
    skipped: str | None = None  # why no model was trained (too little reference text)

    def as_metadata(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _key(text: str, seed: int) -> bytes:
    return hashlib.blake2b(f"{seed}\x00{text}".encode(), digest_size=8).digest()


def _chunks(text: str, config: QualityClassifierConfig) -> Iterator[str]:
    """Paragraph-aligned pieces of at most ``max_chars_per_doc`` characters."""
    piece: list[str] = []
    size = 0
    for para in text.split("\n\n"):
        if size + len(para) > config.max_chars_per_doc and size >= config.min_chars_per_doc:
            yield "\n\n".join(piece)
            piece, size = [], 0
        piece.append(para[: config.max_chars_per_doc])
        size += len(para)
    if size >= config.min_chars_per_doc:
        yield "\n\n".join(piece)[: config.max_chars_per_doc]


class _Sample:
    """The ``limit`` texts with the smallest seeded hash: a deterministic, bounded sample."""

    def __init__(self, limit: int, seed: int) -> None:
        self.limit, self.seed = limit, seed
        self._heap: list[tuple[bytes, str]] = []

    def add(self, text: str) -> None:
        item = (_neg(_key(text, self.seed)), text)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, item)
        elif item > self._heap[0]:
            heapq.heapreplace(self._heap, item)

    def texts(self) -> list[str]:
        return [t for _, t in sorted(self._heap, reverse=True)]


def _neg(key: bytes) -> bytes:
    return bytes(255 - b for b in key)  # max-heap on the hash via a min-heap


def collect_examples(
    raw_document_uris: list[str], config: QualityClassifierConfig
) -> tuple[list[str], list[str], str]:
    """(positives, negatives, negative kind) sampled from the raw shards and reference files."""
    positives = _Sample(config.max_docs_per_class, config.seed)
    negatives = _Sample(config.max_docs_per_class, config.seed + 1)
    for uri in raw_document_uris:
        for batch in storage.iter_table_batches(uri, batch_size=1024):
            for text, source in zip(
                batch.column("text").to_pylist(), batch.column("source").to_pylist(), strict=True
            ):
                if not text or source in config.code_sources:
                    continue
                if source in config.reference_sources:
                    target = positives
                elif config.negative_sources is None or source in config.negative_sources:
                    target = negatives
                else:
                    continue
                for chunk in _chunks(text, config):
                    target.add(chunk)
    for uri in config.reference_uris:
        kind = kind_for(uri)
        if kind is None:
            raise ConfigError(f"reference file {uri}: use JSONL, Parquet or text")
        for record in iter_records(RawFile(uri=uri, source="reference", kind=kind)):
            if not is_reject(record):
                for chunk in _chunks(record["text"], config):
                    positives.add(chunk)
    pos, neg = positives.texts(), negatives.texts()
    kind = "pool"
    if config.negatives == "synthetic" or (
        config.negatives == "auto" and len(neg) < config.min_negatives
    ):
        kind, neg = "synthetic", [_shuffled(t, config.seed) for t in pos]
    if len(pos) < MIN_EXAMPLES or len(neg) < MIN_EXAMPLES:
        raise DataError(_too_few(len(pos), len(neg), config))
    return pos, neg, kind


def _too_few(num_pos: int, num_neg: int, config: QualityClassifierConfig) -> str:
    return (
        f"only {num_pos} reference and {num_neg} negative documents (need {MIN_EXAMPLES} each; "
        f"reference_sources={list(config.reference_sources)} found in the raw shards, "
        f"reference_uris={list(config.reference_uris)}): add reference_uris (books, "
        "encyclopedic or curated JSONL/Parquet/text) or name a raw-shard source in "
        "reference_sources"
    )


def skipped_reason(dir_uri: str) -> str | None:
    """Why the classifier folder holds no model (training was skipped), else ``None``."""
    meta_uri = storage.join(dir_uri, "meta.json")
    if storage.exists(storage.join(dir_uri, "model.bin")) or not storage.exists(meta_uri):
        return None
    return storage.read_json(meta_uri).get("skipped")


def _shuffled(text: str, seed: int) -> str:
    tokens = text.split()
    random.Random(_key(text, seed)).shuffle(tokens)
    return " ".join(tokens)


def to_line(text: str) -> str:
    """fastText input: lower-cased tokens on one line."""
    return " ".join(words(text.lower()))


def train_quality_classifier(
    raw_document_uris: list[str], output_dir_uri: str, config: QualityClassifierConfig
) -> QualityClassifierStats:
    """Sample, split, train, evaluate on the held-out split, and save model.bin + meta.json.

    Without enough reference text and ``without_reference="skip"``: no model.bin, a meta.json
    whose ``skipped`` says why and how to fix it, and stats with ``skipped`` set.
    """
    try:
        pos, neg, kind = collect_examples(raw_document_uris, config)
    except DataError as exc:
        if config.without_reference != "skip" or not str(exc).startswith("only "):
            raise
        return _skip(str(exc), output_dir_uri, config)
    rows = [(POSITIVE, t) for t in pos] + [(NEGATIVE, t) for t in neg]
    cut = int(config.heldout_fraction * 2**16)
    held = [r for r in rows if int.from_bytes(_key(r[1], config.seed + 2)[:2], "big") < cut]
    train = [r for r in rows if int.from_bytes(_key(r[1], config.seed + 2)[:2], "big") >= cut]
    random.Random(config.seed).shuffle(train)
    model = train_supervised(
        (f"{label} {to_line(text)}" for label, text in train),
        storage.join(output_dir_uri, "model.bin"),
        epoch=config.epochs, lr=config.lr, dim=config.dim, word_ngrams=config.word_ngrams,
        seed=config.seed,
    )  # fmt: skip
    scorer = QualityModel(model)
    scores = scorer.score([t for _, t in held])
    truth = [label == POSITIVE for label, _ in held]
    predicted = [s >= 0.5 for s in scores]
    tp = sum(p and t for p, t in zip(predicted, truth, strict=True))
    stats = QualityClassifierStats(
        positives=len(pos),
        negatives=len(neg),
        negative_kind=kind,
        heldout_accuracy=round(
            sum(p == t for p, t in zip(predicted, truth, strict=True)) / max(1, len(held)), 4
        ),
        heldout_precision=round(tp / max(1, sum(predicted)), 4),
        heldout_recall=round(tp / max(1, sum(truth)), 4),
        heldout_docs=len(held),
    )
    pool_scores = sorted(scorer.score(neg))
    quantiles = {
        str(q): pool_scores[min(len(pool_scores) - 1, int(q * len(pool_scores)))] for q in QUANTILES
    }
    storage.write_json(
        {"stats": stats.as_metadata(), "config": asdict(config), "pool_score_quantiles": quantiles},
        storage.join(output_dir_uri, "meta.json"),
    )
    return stats


def _skip(
    reason: str, output_dir_uri: str, config: QualityClassifierConfig
) -> QualityClassifierStats:
    message = f"quality classifier skipped: {reason}; quality_score falls back to the heuristic"
    stale = storage.join(output_dir_uri, "model.bin")
    if storage.exists(stale):  # an earlier model must not be picked up by the filter
        fs, path = storage.filesystem(stale)
        fs.delete_file(path)
    storage.write_json(
        {"skipped": message, "config": asdict(config)}, storage.join(output_dir_uri, "meta.json")
    )
    return QualityClassifierStats(
        positives=0, negatives=0, negative_kind="none", heldout_accuracy=0.0,
        heldout_precision=0.0, heldout_recall=0.0, heldout_docs=0, skipped=message,
    )  # fmt: skip


class QualityModel:
    """A trained classifier: ``score(texts)`` is P(reference-like) per text, in [0, 1]."""

    def __init__(self, model: Any, meta: dict[str, Any] | None = None) -> None:
        self._model, self.meta = model, meta or {}

    @classmethod
    def load(cls, dir_uri: str) -> QualityModel:
        model = load_supervised(storage.join(dir_uri, "model.bin"))
        return cls(model, storage.read_json(storage.join(dir_uri, "meta.json")))

    def score(self, texts: list[str]) -> list[float]:
        if not texts:
            return []
        labels, probs = self._model.predict([to_line(t) for t in texts], k=2)
        out = []
        for label_row, prob_row in zip(labels, probs, strict=True):
            found = dict(zip(label_row, prob_row, strict=True))
            out.append(round(min(1.0, float(found.get(POSITIVE, 0.0))), 6))
        return out

    def threshold_for_top_fraction(self, fraction: float) -> float:
        """The score above which ``fraction`` of the (negative) web pool lies."""
        if not 0.0 < fraction <= 1.0:
            raise ConfigError(f"keep_top_fraction={fraction}: use (0, 1]")
        quantiles = self.meta.get("pool_score_quantiles") or {}
        if not quantiles:
            raise DataError("the classifier's meta.json has no pool_score_quantiles: retrain it")
        q = min(QUANTILES, key=lambda x: abs(x - (1.0 - fraction)))
        return float(quantiles[str(q)]) if fraction < 1.0 else 0.0
