"""Toxicity: trained sentence models plus per-language word lists, aggregated per document.

Documents are long (forum threads, web pages, books), and a single swear word must not drop a
novel, so the decision is made on the *share of toxic sentences*:

1. The text is split into sentences (terminal punctuation, blank lines, and line breaks that
   do not continue a hard-wrapped sentence), so a forum page's posts, quotes and user lines
   are units of their own; a line the page repeats ("Reply With Quote", a quoted post) counts
   once, and lines under ``min_sentence_words`` words (menus, dates, user names) count only
   when flagged.
2. A sentence is *flagged* when it contains a term of the document language's word list
   (built-in lists of our own in :mod:`.toxic_words`, or a JSON file ``{"en": [...], "*":
   [...]}``; terms of up to three words match as whole words: slurs, profanity and coded hate
   such as "white genocide"), or when a sentence model scores it high enough:

   - the **shipped model** (:mod:`.toxicity_model`, ``shipped_model``): a quantized fastText
     classifier in the package, trained on Stormfront, Davidson, HateCheck and ToxiGen labels
     with clean sentences of the same registers (the forums' and Twitter's own clean posts,
     HateCheck's and ToxiGen's non-hateful statements, Wikipedia, books, our neutral sentences
     about groups); flagged from ``shipped_threshold``;
   - the linear profanity model of the ``alt-profanity-check`` wheel (``model``, read from the
     installed package by :mod:`.profanity_model`), flagged from ``sentence_threshold``, or
     from ``identity_threshold`` when the sentence names a group of people
     (:data:`.toxic_words.IDENTITY_TERMS`);
   - a classifier trained on your own labels by the ``toxicity`` stage
     (:mod:`.toxicity_classifier`, ``classifier_uri``), flagged from ``classifier_threshold``;
     ``own_model="combine"`` adds it to the shipped model, ``"replace"`` uses it instead.

   Reporting is not endorsing: a sentence with a word of reporting (:data:`.toxic_words.
   REPORTING_TERMS`: "said", "police", "according to", ...) is flagged by the profanity model
   or your classifier only from ``reported_threshold``. Sentences under ``min_model_words``
   words are judged by the word lists alone.
3. **Languages.** A model reads only documents of the languages it was trained on (the shipped
   model's card says which: English), and of those only the sentences that do not look like
   another language (:func:`.toxicity_evidence.looks_foreign`). A document of another language
   is judged by that language's word list, or by nothing: ``judged_by`` says which (``"models:
   en"``, ``"word lists: de"``, ``"none: sw"``), in the reject's detail and in the filter
   stage's ``toxicity_judged_by`` counts; its ``toxicity_score`` stays null unless a word list
   flags a sentence, and the funnel counts it (``toxicity_unscored``): unscored, not clean.
4. ``toxicity_score`` = flagged sentences / counted sentences, set on every document that is
   scored (kept and rejected). A document is dropped ``toxic_content`` when its score is ≥
   ``max_toxic_share`` and at least ``min_toxic_sentences`` sentences are flagged (all of them
   if it has fewer).

The defaults are the shipped model's card (its thresholds were chosen by leave-one-source-out
selection and calibrated on clean web pages by ``scripts/train_toxicity_model.py``; measured
in ``bench/cleaning_toxicity.py``)::

    from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
    rule = ToxicityFilter(ToxicityConfig())
    rule({"text": "A calm sentence about gardens. Another one.", "language": "en"})  # -> None
    rule.score_batch([{"text": "You are a fucking idiot.", "language": "en"}])  # -> [1.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.filters import profanity_model
from pretrain.filters.base import Document, Filter, Rejection
from pretrain.filters.terms import Terms
from pretrain.filters.toxic_words import DEFAULT_WORD_LISTS, IDENTITY_TERMS, REPORTING_TERMS
from pretrain.filters.toxicity_evidence import (
    Evidence,
    Lookup,
    Reading,
    Thresholds,
    collect,
    decide,
    split_sentences,
)
from pretrain.filters.toxicity_model import VERSION as SHIPPED_VERSION
from pretrain.filters.toxicity_model import ShippedModel, available_versions, load_shipped
from pretrain.settings import check_types
from pretrain.text import is_unsegmented

__all__ = ["ToxicityConfig", "ToxicityFilter", "load_word_lists", "split_sentences"]
MODELS = ("profanity_check",)
OWN_MODEL_MODES = ("combine", "replace")


@dataclass(frozen=True, kw_only=True)
class ToxicityConfig:
    word_lists_uri: str | None = None  # JSON {language: [words]}; None: DEFAULT_WORD_LISTS
    # The thresholds are the shipped model's card's (scripts/train_toxicity_model.py chose them
    # by leave-one-source-out recall under a bound on clean web pages; a test holds them equal).
    # The model shipped in the package (pretrain.filters.toxicity_model): its version, or None.
    # Its version is part of the filter stage's identity: a new one makes filtered_shards stale.
    shipped_model: str | None = SHIPPED_VERSION
    shipped_threshold: float = 0.8  # its P(toxic) from which a sentence is flagged
    # ... and from which a sentence naming a group of people is (None: as any other sentence;
    # toxicity-v1's 0.15 flagged nearly every thread of neutral statements about groups)
    shipped_identity_threshold: float | None = None
    model: str | None = "profanity_check"  # profanity sentence model; None: not used
    model_languages: tuple[str, ...] = ("en",)  # languages it (and your classifier) score
    sentence_threshold: float = 0.5  # its P(toxic) from which a sentence is flagged
    # ... and from which a sentence naming a group is (None: as any other sentence)
    identity_threshold: float | None = 0.3
    # A sentence with a word of reporting ("said", "police", ...) is flagged by the profanity
    # model or your classifier only from this probability (None: like any other sentence).
    reported_threshold: float | None = 0.9
    min_model_words: int = 4  # shorter sentences are flagged by the word lists only
    max_toxic_share: float = 0.12  # drop at flagged / counted sentences ≥ this
    min_toxic_sentences: int = 3  # fewer flagged sentences never drop a longer document
    # Shorter lines (menus, dates, user names, "Reply with quote") count only when flagged,
    # so a scraped forum page's boilerplate does not dilute the share of its posts.
    min_sentence_words: int = 3
    # A fastText classifier trained on your labels (a toxicity_classifier folder, see
    # pretrain.filters.toxicity_classifier; the filtered_shards asset fills it in): a sentence
    # of model_languages is also flagged when it gives P(toxic) >= classifier_threshold.
    classifier_uri: str | None = None
    classifier_threshold: float = 0.5
    # "combine": your classifier flags sentences next to the shipped model; "replace": it
    # takes the shipped model's place (when it was trained; without labels the shipped one stays)
    own_model: str = "combine"

    def __post_init__(self) -> None:
        check_types(self)
        if self.model is not None and self.model not in MODELS:
            raise ConfigError(f"model={self.model!r}: choose one of {MODELS} or None")
        if self.shipped_model is not None and self.shipped_model not in available_versions():
            raise ConfigError(
                f"shipped_model={self.shipped_model!r}: choose one of {available_versions()} "
                "(the models in pretrain/filters/models/) or None"
            )
        if self.own_model not in OWN_MODEL_MODES:
            raise ConfigError(f"own_model={self.own_model!r}: choose one of {OWN_MODEL_MODES}")
        if isinstance(self.model_languages, str):
            raise ConfigError(f"model_languages={self.model_languages!r}: use a tuple ('en',)")
        names = ("sentence_threshold", "max_toxic_share", "identity_threshold",
                 "shipped_threshold", "shipped_identity_threshold", "reported_threshold",
                 "classifier_threshold")  # fmt: skip
        for name in names:
            value = getattr(self, name)
            if value is not None and not 0.0 < value <= 1.0:
                raise ConfigError(f"{name}={value}: use a share in (0, 1]")
        for name in ("min_sentence_words", "min_toxic_sentences", "min_model_words"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)}: use at least 1")


def load_word_lists(uri: str | None) -> dict[str, frozenset[str]]:
    """Lower-cased word sets per language (``*``: every language) from ``uri`` or the built-ins."""
    if uri is None:
        raw: dict = DEFAULT_WORD_LISTS
    else:
        raw = storage.read_json(uri)
        if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
            raise ConfigError(f"{uri}: expected a JSON object of language -> list of words")
    return {lang: frozenset(w.lower() for w in ws if w.strip()) for lang, ws in raw.items()}


def _lookup(words: frozenset[str], unsegmented: bool) -> Lookup:
    """Token sets for terms of 1-3 words; a regex for unsegmented languages (substrings)."""
    if not words:
        return None
    if not unsegmented and Terms.fits(words):
        return Terms(words)
    alternatives = "|".join(regex.escape(w) for w in sorted(words, key=len, reverse=True))
    if unsegmented:
        return regex.compile(f"(?:{alternatives})", regex.IGNORECASE)
    return regex.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", regex.IGNORECASE)


class ToxicityFilter(Filter):
    """Sets ``toxicity_score``; drops ``toxic_content`` over the configured share.

    ``shipped`` (development tools only) scores with a model object instead of loading
    ``config.shipped_model``: ``scripts/train_toxicity_model.py`` calibrates a candidate so.
    """

    name = "toxicity"

    def __init__(
        self, config: ToxicityConfig | None = None, *, shipped: ShippedModel | None = None
    ) -> None:
        self.config = config = config or ToxicityConfig()
        lists = load_word_lists(config.word_lists_uri)
        everywhere = lists.pop("*", frozenset())
        # language -> word-list lookup (None: the ``*`` list, for any other language)
        looked_up: dict[str | None, Lookup] = {
            lang: _lookup(words | everywhere, is_unsegmented(lang)) for lang, words in lists.items()
        }
        looked_up[None] = _lookup(everywhere, False)
        if config.model is not None:
            profanity_model.load()  # fail at construction, not in the middle of a shard
        self.classifier = None  # None also when the folder says training was skipped
        if config.classifier_uri is not None:
            from pretrain.filters.toxicity_classifier import ToxicityClassifier

            self.classifier = ToxicityClassifier.load(config.classifier_uri)
        if shipped is None and config.shipped_model is not None:
            shipped = load_shipped(config.shipped_model)
        if self.classifier is not None and config.own_model == "replace":
            shipped = None
        self.shipped = shipped
        own = frozenset(config.model_languages)
        # scorer name -> (P(toxic) of sentences' word tokens, the languages it reads)
        self._scorers: dict = {}
        if shipped is not None:
            self._scorers["shipped"] = (
                shipped.probabilities_of_words,
                frozenset(shipped.languages),
            )
        if config.model is not None:
            self._scorers["profanity"] = (profanity_model.probabilities_of_words, own)
        if self.classifier is not None:
            self._scorers["own"] = (self.classifier.probabilities_of_words, own)
        self.scored_languages = frozenset().union(*(langs for _, langs in self._scorers.values()))
        self.reading = Reading(
            lists=looked_up,
            groups={lang: Terms(terms) for lang, terms in IDENTITY_TERMS.items()},
            reporting={lang: Terms(terms) for lang, terms in REPORTING_TERMS.items()}
            if config.reported_threshold is not None else {},
            model_languages=self.scored_languages,
            min_model_words=config.min_model_words,
            min_sentence_words=config.min_sentence_words,
        )  # fmt: skip
        self.thresholds = self.thresholds_of(config)

    @staticmethod
    def thresholds_of(config: ToxicityConfig) -> Thresholds:
        """What :func:`.toxicity_evidence.decide` reads of a config."""
        return Thresholds(
            shipped=config.shipped_threshold,
            shipped_identity=config.shipped_identity_threshold,
            profanity=config.sentence_threshold,
            profanity_identity=config.identity_threshold,
            profanity_reported=config.reported_threshold,
            own=config.classifier_threshold,
            own_reported=config.reported_threshold,
            max_toxic_share=config.max_toxic_share,
            min_toxic_sentences=config.min_toxic_sentences,
            min_model_words=config.min_model_words,
        )

    def evidence(self, docs: list[Document]) -> Evidence:
        """Every model's scores of the readable sentences of ``docs`` (one call per model)."""
        evidence = collect(docs, self.reading)
        for name, (probabilities, languages) in self._scorers.items():
            evidence.score(name, probabilities, languages)
        return evidence

    def score_batch(
        self, docs: list[Document], decidable: list[bool] | None = None
    ) -> list[float | None]:
        """Score every document (one call per model for the batch); sets ``toxicity_score``
        (``decidable`` is accepted for the filter stage's call and changes nothing)."""
        evidence = self.evidence(docs)
        flagged, counted, dropped = decide(evidence, self.thresholds)
        scores: list[float | None] = []
        for i, doc in enumerate(docs):
            scored = evidence.languages[i] in self.scored_languages
            found = evidence.found[i]
            score: float | None = flagged[i] / counted[i] if counted[i] else 0.0
            if not scored and not found:
                score = None  # no model covers this language and no listed word: unscored
            doc["toxicity_score"] = score
            doc["_toxicity"] = (doc.get("text"), int(flagged[i]), int(counted[i]),
                                bool(dropped[i]), found, scored, evidence.judged_by[i])  # fmt: skip
            scores.append(score)
        return scores

    def _cached(self, doc: Document) -> tuple:
        cached = doc.get("_toxicity")
        if cached is None or cached[0] is not doc.get("text"):  # unscored, or text changed
            self.score_batch([doc])
        return doc["_toxicity"]

    def unscored(self, doc: Document) -> bool:
        """Whether no sentence model covers the document's language (word lists only)."""
        return not self._cached(doc)[5]

    def judged_by(self, doc: Document) -> str:
        """``"models: en"``, ``"word lists: de"`` or ``"none: sw"``: what could flag it."""
        return self._cached(doc)[6]

    def check(self, doc: Document) -> Rejection | None:
        _, flagged, counted, dropped, found, _, judged_by = self._cached(doc)
        if not dropped:
            return None  # kept: no reason to write (this runs for every document)
        words = ", ".join(sorted({w.lower() for w in found})[:3])
        listed = f"{len(found)} listed words" + (f": {words}" if words else "")
        score = doc["toxicity_score"] or 0.0
        return "toxic_content", (
            f"{score:.3f} ({flagged}/{counted} sentences, {listed}; judged by {judged_by})"
        )
