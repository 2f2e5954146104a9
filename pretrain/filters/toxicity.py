"""Toxicity: trained sentence models plus per-language word lists, aggregated per document.

Documents are long (forum threads, web pages, books), and a single swear word must not drop a
novel, so the decision is made on the *share of toxic sentences*:

1. The text is split into sentences (terminal punctuation, blank lines, and line breaks that
   do not continue a hard-wrapped sentence), so a forum page's posts, quotes and user lines
   are units of their own.
2. A sentence is *flagged* when it contains a term of the document language's word list
   (built-in lists of our own in :mod:`.toxic_words`, or a JSON file ``{"en": [...], "*":
   [...]}``; terms of up to three words match as whole words: slurs, profanity and coded hate
   such as "white genocide"), or when a sentence model scores it high enough:

   - the **shipped model** (:mod:`.toxicity_model`, ``shipped_model``): a quantized fastText
     classifier in the package, trained on Stormfront, Davidson, HateCheck and ToxiGen labels
     with Wikipedia prose as clean text; it knows implicit hate ("they breed like rabbits")
     that names no slur and uses no profanity. Flagged from ``shipped_threshold``, or from
     ``shipped_identity_threshold`` when the sentence names a group of people
     (:data:`.toxic_words.IDENTITY_TERMS`);
   - the linear profanity model of the ``alt-profanity-check`` wheel (``model``, read from the
     installed package by :mod:`.profanity_model`), flagged from ``sentence_threshold``
     (``identity_threshold``, off by default, lowers it for a sentence naming a group, the
     rule this model alone needed);
   - a classifier trained on your own labels by the ``toxicity`` stage
     (:mod:`.toxicity_classifier`, ``classifier_uri``), flagged from ``classifier_threshold``;
     ``own_model="combine"`` adds it to the shipped model, ``"replace"`` uses it instead.

   Reporting is not endorsing: a sentence with a word of reporting (:data:`.toxic_words.
   REPORTING_TERMS`: "said", "police", "according to", "charged", ...) is flagged by a model only
   from ``reported_threshold``. Sentences under ``min_model_words`` words (menus, "Ho, ho!",
   user names) are judged by the word lists alone. Each model scores only its languages;
   documents of a language no model covers are *unscored*: ``toxicity_score`` stays null unless
   a word list flags a sentence, and the funnel counts them (``toxicity_unscored``).
3. The shipped model's **document model** (toxicity-v3 on) reads the whole text of a document
   of its languages: a forum thread of hate is often hateful as a whole while no single
   sentence is. A document it scores from ``document_threshold`` is dropped when at least one
   sentence is *evidence* (flagged, or scored from ``document_evidence_threshold`` by the
   shipped sentence model), so that the document model's sense of a text's style never drops
   a page on its own.
4. ``toxicity_score`` = flagged sentences / sentences (distinct sentences: a forum page's
   repeated "Reply With Quote" or a quoted post count once; lines under ``min_sentence_words``
   words count only when flagged), set on every document that is scored (kept and rejected).
   A document is dropped ``toxic_content`` when its score is ≥ ``max_toxic_share`` and at
   least ``min_toxic_sentences`` sentences are flagged (all of them if it has fewer), or by
   the document model (3.).

``bench/cleaning_quality.py`` measures recall on held-out forum threads and implicit hate,
and false positives on clean web pages, violent and political news, news pages and books; the
thresholds were calibrated by ``scripts/train_toxicity_model.py`` on the ``dev`` split and the
news and books (hard negatives), and are reported on the held-out split::

    from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
    rule = ToxicityFilter(ToxicityConfig())
    rule({"text": "A calm sentence about gardens. Another one.", "language": "en"})  # -> None
    rule.score_batch([{"text": "You are a fucking idiot.", "language": "en"}])  # -> [1.0]
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import regex

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.filters import profanity_model
from pretrain.filters.base import Document, Filter, Rejection
from pretrain.filters.terms import Terms
from pretrain.filters.toxic_words import DEFAULT_WORD_LISTS, IDENTITY_TERMS, REPORTING_TERMS
from pretrain.filters.toxicity_classifier import words_of
from pretrain.filters.toxicity_model import VERSION as SHIPPED_VERSION
from pretrain.filters.toxicity_model import ShippedModel, available_versions, load_shipped
from pretrain.settings import check_types
from pretrain.text import is_unsegmented

MODELS = ("profanity_check",)
# A break after terminal punctuation, at a blank line, or at a line break that does not go on
# in lower case (a hard-wrapped sentence continues in lower case and stays one sentence).
# Stdlib ``re`` (5x faster here than ``regex`` with \p{Ll}): Latin lower case spelled out.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n\s*\n|\n(?![ \t]*[a-zß-öø-ÿ])")
_UNREAD = object()  # a document the document model has not read yet (see score_batch)
_MAX_SENTENCE_CHARS = 2000  # a run-on "sentence" is scored in pieces of this size


OWN_MODEL_MODES = ("combine", "replace")


@dataclass(frozen=True, kw_only=True)
class ToxicityConfig:
    word_lists_uri: str | None = None  # JSON {language: [words]}; None: DEFAULT_WORD_LISTS
    # The model shipped in the package (pretrain.filters.toxicity_model): its version, or None.
    # Its version is part of the filter stage's identity: a new one makes filtered_shards stale.
    shipped_model: str | None = SHIPPED_VERSION
    shipped_threshold: float = 0.8  # its probability from which a sentence is flagged
    # ... and from which a sentence naming a group of people is (None: no lower threshold;
    # toxicity-v1's 0.15 flagged nearly every thread of neutral statements about groups)
    shipped_identity_threshold: float | None = None
    # Its document model (toxicity-v3 on) reads a whole thread or page: a document it scores
    # at least this is dropped when one of its sentences is evidence, i.e. flagged, or scored
    # at least document_evidence_threshold by the sentence model (None: not used). Forum
    # threads of hate hold many posts no sentence of which is hateful alone.
    document_threshold: float | None = 0.95
    document_evidence_threshold: float = 0.2
    model: str | None = "profanity_check"  # profanity sentence model; None: not used
    model_languages: tuple[str, ...] = ("en",)  # languages it (and your classifier) score
    sentence_threshold: float = 0.5  # its probability from which a sentence is flagged
    # ... and from which a sentence naming a group is (None: off; the shipped model does it)
    identity_threshold: float | None = None
    # A sentence with a word of reporting ("said", "police", ...) is flagged by a model only
    # from this probability (None: like any other sentence): reporting is not endorsing.
    reported_threshold: float | None = 0.9
    min_model_words: int = 4  # shorter sentences are flagged by the word lists only
    max_toxic_share: float = 0.06  # drop at flagged sentences / sentences ≥ this
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
        names: tuple[str, ...]
        names = ("sentence_threshold", "max_toxic_share", "identity_threshold", "shipped_threshold")
        names += ("shipped_identity_threshold", "reported_threshold", "classifier_threshold")
        names += ("document_threshold", "document_evidence_threshold")
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


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; run-ons longer than 2,000 characters are cut into pieces."""
    out = []
    for piece in _SENTENCE_BREAK.split(text):
        piece = piece.strip()
        while len(piece) > _MAX_SENTENCE_CHARS:
            out.append(piece[:_MAX_SENTENCE_CHARS])
            piece = piece[_MAX_SENTENCE_CHARS:]
        if piece:
            out.append(piece)
    return out


# doc, sentence, language, names a group, reports, its words (an index into the batch's)
_Row = tuple[int, int, str | None, bool, bool, int]


class _Scorer(NamedTuple):
    """A sentence model as the filter uses it."""

    probabilities: Callable[[list[list[str]]], list[float]]  # of sentences' word tokens
    languages: frozenset[str]  # it scores only documents of these languages
    threshold: float
    identity_threshold: float | None  # for a sentence that names a group of people
    reported_threshold: float | None  # for a sentence that reports (None: its threshold)
    gives_evidence: bool = False  # its scores are the document model's evidence


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
        self._lists: dict[str | None, Terms | regex.Pattern[str] | None] = {
            lang: self._lookup(words | everywhere, is_unsegmented(lang))
            for lang, words in lists.items()
        }
        self._lists[None] = self._lookup(everywhere, False)
        # looked up with the document's language, which may be None
        self._groups: dict[str | None, Terms] = {
            lang: Terms(terms) for lang, terms in IDENTITY_TERMS.items()
        }
        self._reporting: dict[str | None, Terms] = {
            lang: Terms(terms) for lang, terms in REPORTING_TERMS.items()
        }
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
        self._document = (
            shipped if shipped is not None and shipped.has_document_model
            and config.document_threshold is not None else None
        )  # fmt: skip
        own, reported = frozenset(config.model_languages), config.reported_threshold
        self._models: list[_Scorer] = []
        if shipped is not None:  # trained with news-like clean prose: no raised bar for reports
            self._models.append(
                _Scorer(
                    shipped.probabilities_of_words,
                    frozenset(shipped.languages),
                    config.shipped_threshold,
                    config.shipped_identity_threshold,
                    None,
                    gives_evidence=self._document is not None,
                )
            )
        if config.model is not None:
            self._models.append(
                _Scorer(
                    profanity_model.probabilities_of_words,
                    own,
                    config.sentence_threshold,
                    config.identity_threshold,
                    reported,
                )
            )
        if self.classifier is not None:
            self._models.append(_Scorer(self.classifier.probabilities_of_words, own,
                                        config.classifier_threshold, None, reported))  # fmt: skip
        self.scored_languages = frozenset().union(*(m.languages for m in self._models))

    @staticmethod
    def _lookup(words: frozenset[str], unsegmented: bool) -> Terms | regex.Pattern[str] | None:
        """Token sets for terms of 1-3 words; a regex for unsegmented languages (substrings)."""
        if not words:
            return None
        if not unsegmented and Terms.fits(words):
            return Terms(words)
        alternatives = "|".join(regex.escape(w) for w in sorted(words, key=len, reverse=True))
        if unsegmented:
            return regex.compile(f"(?:{alternatives})", regex.IGNORECASE)
        return regex.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", regex.IGNORECASE)

    @staticmethod
    def _listed_in(sentence: str, lookup: Terms | regex.Pattern[str]) -> bool:
        if isinstance(lookup, Terms):
            return lookup.named_in(sentence)
        return lookup.search(sentence) is not None

    @staticmethod
    def _context(words: list[list[str]], terms: Terms | None, tokens: list[str]) -> list[bool]:
        """Per sentence (its word tokens), whether it holds one of ``terms`` (a doc-wide check
        on the document's ``tokens`` first)."""
        if terms is None or not terms.named_in_tokens(tokens):
            return [False] * len(words)
        return [terms.named_in_tokens(w) for w in words]

    def score_batch(
        self, docs: list[Document], decidable: list[bool] | None = None
    ) -> list[float | None]:
        """Score every document (one call per model for the batch); sets ``toxicity_score``.

        ``decidable`` (default: all) marks the documents this rule may still drop: the
        document model, which only decides, reads those now and any other one when
        :meth:`check` asks (the filter stage scores its rejects too, and does not decide them).
        """
        rows: list[_Row] = []
        # The word tokens of the batch's distinct sentences, read by every model: a page's
        # repeated lines, a thread's quoted posts and a site's boilerplate are read once.
        words: list[list[str]] = []
        index: dict[str, int] = {}

        def words_index(sentence: str) -> int:
            k = index.get(sentence)
            if k is None:
                k = index[sentence] = len(words)
                words.append(words_of(sentence))
            return k

        split: list[list[str]] = []
        flags: list[list[bool]] = []
        hits: list[list[str]] = []
        scored: list[bool] = []
        for i, doc in enumerate(docs):
            text, language = doc.get("text") or "", doc.get("language")
            lookup = self._lists.get(language, self._lists[None])
            use_models = language in self.scored_languages
            scored.append(use_models)
            # One tokenization serves the word lists, the group and reporting terms and the
            # models: a scored document's words are its sentences' words (a run-on cut at
            # 2,000 characters may cut a word in two, which no sentence can flag either).
            sentences: list[str] = []
            sentence_words: list[list[str]] = []
            if use_models:
                sentences = split_sentences(text)
                keys = [words_index(s) for s in sentences]
                sentence_words = [words[k] for k in keys]
                tokens = list(itertools.chain.from_iterable(sentence_words))
            else:
                tokens = words_of(text) if isinstance(lookup, Terms) else []
            if lookup is None:
                found = []
            elif isinstance(lookup, Terms):
                found = lookup.found_in_tokens(tokens)
            else:
                found = lookup.findall(text)
            hits.append(found)
            if not found and not use_models:
                split.append([])  # nothing can be flagged: no score, without splitting
                flags.append([])
                continue
            sentences = sentences or split_sentences(text)
            split.append(sentences)
            if not found or lookup is None:  # found implies a lookup
                flags.append([False] * len(sentences))
            elif isinstance(lookup, Terms) and sentence_words:
                flags.append([lookup.named_in_tokens(w) for w in sentence_words])
            else:
                flags.append([self._listed_in(s, lookup) for s in sentences])
            if not use_models:
                continue
            minimum = self.config.min_model_words
            open_rows = [
                j for j, (s, f) in enumerate(zip(sentences, flags[i], strict=True))
                if not f and len(s.split()) >= minimum
            ]  # fmt: skip
            open_words = [sentence_words[j] for j in open_rows]
            named = self._context(open_words, self._groups.get(language), tokens)
            reporting = self._reporting.get(language) if self.config.reported_threshold else None
            reported = self._context(open_words, reporting, tokens)
            rows.extend(zip([i] * len(open_rows), open_rows, [language] * len(open_rows),
                            named, reported, [keys[j] for j in open_rows], strict=True))  # fmt: skip
        word_flagged = [sum(f) for f in flags]
        evidence = self._flag_with_models(rows, words, flags)
        document = self._document_probabilities(docs, scored, decidable)
        scores: list[float | None] = []
        for i, (doc, sentences, doc_flags, found, n_words, is_scored, doc_p) in enumerate(
            zip(docs, split, flags, hits, word_flagged, scored, document, strict=True)
        ):
            flagged, counted = self._tally(sentences, doc_flags, doc.get("language"))
            score: float | None = flagged / counted if counted else 0.0
            if not is_scored and not found:
                score = None  # no model covers this language and no listed word: unscored
            doc["toxicity_score"] = score
            doc["_toxicity"] = (doc.get("text"), flagged, counted, n_words, found, is_scored,
                                doc_p, flagged + evidence.get(i, 0))  # fmt: skip
            scores.append(score)
        return scores

    def _document_probabilities(
        self, docs: list[Document], scored: list[bool], decidable: list[bool] | None
    ) -> list:
        """P(toxic) of the whole text from the shipped document model, for the decidable
        documents of its languages (``_UNREAD`` for its other documents, None for the rest and
        when it is not used)."""
        out: list[float | object | None] = [None] * len(docs)
        if self._document is None:
            return out
        languages = self._document.languages
        picked = []
        for i, (doc, is_scored) in enumerate(zip(docs, scored, strict=True)):
            if is_scored and doc.get("language") in languages and (doc.get("text") or "").strip():
                if decidable is None or decidable[i]:
                    picked.append(i)
                else:
                    out[i] = _UNREAD
        texts = [docs[i]["text"] for i in picked]
        for i, p in zip(picked, self._document.document_probabilities(texts), strict=True):
            out[i] = p
        return out

    def _flag_with_models(
        self, rows: list[_Row], words: list[list[str]], flags: list[list[bool]]
    ) -> dict[int, int]:
        """Flag the open sentences each model scores high enough (in its languages only).

        Returns, per document (its index), the sentences left unflagged that the shipped model
        scores at least ``document_evidence_threshold``: evidence for the document model."""
        candidates: dict[int, set[int]] = {}
        bar = self.config.document_evidence_threshold
        for scorer in self._models:
            needed = sorted({row[5] for row in rows if row[2] in scorer.languages})
            scores = dict(
                zip(needed, scorer.probabilities([words[k] for k in needed]), strict=True)
            )
            for i, j, language, named, reported, k in rows:
                if language not in scorer.languages:
                    continue
                p = scores[k]
                limit = scorer.threshold
                if reported:  # a report naming a group gets no lower threshold
                    limit = max(limit, scorer.reported_threshold or limit)
                elif named and scorer.identity_threshold is not None:
                    limit = min(limit, scorer.identity_threshold)
                if p >= limit:
                    flags[i][j] = True
                elif scorer.gives_evidence and p >= bar:
                    candidates.setdefault(i, set()).add(j)
        return {i: sum(not flags[i][j] for j in js) for i, js in candidates.items()}

    def _tally(
        self, sentences: list[str], flags: list[bool], language: str | None
    ) -> tuple[int, int]:
        """(flagged, counted) distinct sentences: a line repeated on a page (a forum's "Reply
        With Quote", a quoted post) counts once; short lines count only when flagged."""
        minimum = 0 if is_unsegmented(language) else self.config.min_sentence_words
        seen: set[str] = set()
        flagged = counted = 0
        for sentence, flag in zip(sentences, flags, strict=True):
            if sentence in seen:
                continue
            seen.add(sentence)
            flagged += flag
            counted += flag or len(sentence.split()) >= minimum
        return flagged, counted

    def _cached(self, doc: Document) -> tuple:
        cached = doc.get("_toxicity")
        if cached is None or cached[0] is not doc.get("text"):  # unscored, or text changed
            self.score_batch([doc])
        return doc["_toxicity"]

    def unscored(self, doc: Document) -> bool:
        """Whether no sentence model covers the document's language (word lists only)."""
        return not self._cached(doc)[5]

    def check(self, doc: Document) -> Rejection | None:
        _, flagged, sentences, n_words, found, _, document, evidence = self._cached(doc)
        if document is _UNREAD:  # scored as not decidable: read it now
            assert self._document is not None
            document = self._document.document_probabilities([doc["text"]])[0]
        score = doc["toxicity_score"] or 0.0
        needed = min(self.config.min_toxic_sentences, sentences)
        threshold = self.config.document_threshold
        if sentences and flagged >= needed and score >= self.config.max_toxic_share:
            why = f"{score:.3f}"
        elif document is not None and threshold is not None and document >= threshold and evidence:
            why = f"document model {document:.3f} with {evidence} sentences of evidence"
        else:
            return None  # kept: no reason to write (this runs for every document)
        words = ", ".join(sorted({w.lower() for w in found})[:3])
        listed = f"{n_words} with listed words" + (f": {words}" if words else "")
        return "toxic_content", f"{why} ({flagged}/{sentences} sentences, {listed})"
