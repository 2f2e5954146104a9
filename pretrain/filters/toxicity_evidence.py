"""What the toxicity rule knows about each sentence of a batch, and its decision over it.

The rule reads a batch in two steps, so that settings can be tried without reading the text
again (``scripts/train_toxicity_model.py`` calibrates a candidate model over thousands of
settings this way, with the very code the filter runs):

1. :func:`collect` splits every document into its *distinct* sentences (a line a forum page
   repeats counts once) and records, per sentence: its document, whether it holds a term of the
   document language's word list, whether it is long enough to count in the share, whether it
   names a group of people or reports ("said", "police"), and the line of word tokens the
   sentence models read. A sentence is read by the models only when its document's language is
   theirs, it has at least ``min_model_words`` words, no listed term (already flagged), and it
   does not look like another language (:func:`looks_foreign`: a page that language ID calls
   English may still hold German or Min Nan paragraphs, which an English model reads as noise).
2. :func:`decide` flags sentences with :class:`Thresholds` and drops a document when at least
   ``min_toxic_sentences`` of its counted sentences are flagged (all of them if it has fewer)
   and they are at least ``max_toxic_share`` of them.

``judged_by`` says what could flag a document: ``"models: en"`` (a model read at least one of
its sentences), ``"word lists: de"`` (only the word lists of its language: a page in another
language, or an English one whose every sentence is short or looks foreign) or ``"none: sw"``
(no model and no word list: nothing can flag it)::

    evidence = collect(docs, reading)        # ToxicityFilter does this
    evidence.score("shipped", model.probabilities_of_words, frozenset({"en"}))
    flagged, counted, dropped = decide(evidence, thresholds)
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import regex

from pretrain.filters.base import Document
from pretrain.filters.terms import Terms
from pretrain.filters.toxicity_classifier import words_of
from pretrain.text import is_unsegmented

# A break after terminal punctuation, at a blank line, or at a line break that does not go on
# in lower case (a hard-wrapped sentence continues in lower case and stays one sentence).
# Stdlib ``re`` (5x faster here than ``regex`` with \p{Ll}): Latin lower case spelled out.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n\s*\n|\n(?![ \t]*[a-zß-öø-ÿ])")
_MAX_SENTENCE_CHARS = 2000  # a run-on "sentence" is scored in pieces of this size
Lookup = Terms | regex.Pattern[str] | None

# Common English words that are rare as words of other languages written in Latin script: a
# sentence holding one is English enough for an English model.
ENGLISH_WORDS = frozenset(
    "the and are were you your that this it they them their our with not be have has does "
    "what when who will would should can just like my she his her about from there been these "
    "those which than because how why if some any more into out up get got being all its "
    "yours he him".split()
)
# Function words of other languages (German, French, Spanish, Italian, Portuguese, Dutch,
# Polish, the Scandinavian languages) that are not English words.
FOREIGN_WORDS = frozenset(
    "der das und ist nicht ein eine mit von zu sich auf für des dem im auch wird sind oder "
    "aber wie noch nach bei aus le les et est une du que qui dans pour sur au avec ce elle nous "
    "vous sont mais ou cette el los las una del en por para su como más pero muy está di che è "
    "della gli sono questo anche os em um uma não com é het een ik niet zijn wij ze się nie "
    "jest że jak dla och att är det som inte jag og er ikke af på".split()
)


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


def looks_foreign(tokens: list[str]) -> bool:
    """Whether a sentence's word tokens look like a language other than English: no common
    English word, and a function word of another language or mostly non-ASCII words."""
    if not ENGLISH_WORDS.isdisjoint(tokens):
        return False
    if not FOREIGN_WORDS.isdisjoint(tokens):
        return True
    return sum(not t.isascii() for t in tokens) >= 0.3 * len(tokens)


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """The settings :func:`decide` reads (a scorer's threshold None: it flags nothing)."""

    shipped: float | None = None  # the shipped model's P(toxic) from which a sentence is flagged
    shipped_identity: float | None = None  # ... a sentence naming a group (None: as any other)
    profanity: float | None = None  # the profanity model's
    profanity_identity: float | None = None
    profanity_reported: float | None = None  # a sentence that reports (None: as any other)
    own: float | None = None  # your classifier's
    own_reported: float | None = None
    max_toxic_share: float = 0.06
    min_toxic_sentences: int = 3
    min_model_words: int = 1  # a model flags only sentences of at least this many words


@dataclass(kw_only=True)
class Evidence:
    """Arrays over the batch's distinct sentences (document order), and per document."""

    doc: np.ndarray  # the sentence's document (index into the batch)
    listed: np.ndarray  # holds a word-list term of its document's language
    long: np.ndarray  # counts in the share even when not flagged
    words: np.ndarray  # its number of words (split at white space)
    named: np.ndarray  # names a group of people
    reported: np.ndarray  # holds a word of reporting
    line: np.ndarray  # index into ``tokens`` of what the models read; -1: no model reads it
    tokens: list[list[str]]  # the word tokens of the distinct sentences the models read
    languages: list[str | None]  # per document
    found: list[list[str]]  # per document: the listed terms found
    judged_by: list[str]  # per document: "models: en", "word lists: de" or "none: sw"
    scores: dict[str, np.ndarray] = field(default_factory=dict)  # scorer -> per sentence, nan

    @property
    def size(self) -> int:
        return len(self.languages)

    def score(
        self, name: str, probabilities: Callable[[list[list[str]]], list[float]],
        languages: frozenset[str],
    ) -> None:  # fmt: skip
        """Score, with ``name``'s model, the readable sentences of documents in ``languages``."""
        in_language = np.array([lang in languages for lang in self.languages], dtype=bool)
        wanted = (self.line >= 0) & in_language[self.doc]
        needed = np.unique(self.line[wanted])
        p = np.zeros(len(self.tokens) + 1, dtype=np.float32)  # one more: what -1 reads
        if len(needed):
            p[needed] = probabilities([self.tokens[k] for k in needed])
        self.scores[name] = np.where(wanted, p[self.line], np.nan)


def decide(evidence: Evidence, t: Thresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flagged, counted, dropped) per document: flagged and counted distinct sentences (a short
    line counts only when flagged), and whether the document is dropped."""
    flag = evidence.listed.copy()
    named, reported = evidence.named, evidence.reported
    long_enough = evidence.words >= t.min_model_words
    rules = (("shipped", t.shipped, t.shipped_identity, None),
             ("profanity", t.profanity, t.profanity_identity, t.profanity_reported),
             ("own", t.own, None, t.own_reported))  # fmt: skip
    for name, threshold, identity, report in rules:
        scores = evidence.scores.get(name)
        if threshold is None or scores is None:
            continue
        limit = np.full(len(flag), threshold, dtype=np.float64)
        if identity is not None:  # a report naming a group gets no lower threshold
            limit[named & ~reported] = min(threshold, identity)
        if report is not None:  # reporting is not endorsing
            limit[reported] = max(threshold, report)
        flag |= long_enough & (np.nan_to_num(scores, nan=-1.0) >= limit)
    counted = evidence.long | flag
    size = evidence.size
    flagged = np.bincount(evidence.doc, weights=flag, minlength=size).astype(np.int64)
    total = np.bincount(evidence.doc, weights=counted, minlength=size).astype(np.int64)
    needed = np.minimum(t.min_toxic_sentences, total)
    share = flagged / np.maximum(total, 1)
    dropped = (total > 0) & (flagged >= needed) & (share >= t.max_toxic_share)
    return flagged, total, dropped


@dataclass(frozen=True, kw_only=True)
class Reading:
    """How :func:`collect` reads documents: the filter's look-ups and settings."""

    lists: dict[str | None, Lookup]  # language -> its word list (None: any other language)
    groups: dict[str | None, Terms]  # language -> terms naming groups of people
    reporting: dict[str | None, Terms]  # language -> words of reporting
    model_languages: frozenset[str]  # what some sentence model reads
    min_model_words: int = 4  # shorter sentences are judged by the word lists alone
    min_sentence_words: int = 3  # shorter lines count in the share only when flagged


def _listed(sentences: list[str], words: list[list[str]], lookup: Lookup) -> list[bool]:
    if lookup is None:
        return [False] * len(sentences)
    if isinstance(lookup, Terms):
        return [lookup.named_in_tokens(w) for w in words]
    return [lookup.search(s) is not None for s in sentences]


def _found(text: str, tokens: list[str], lookup: Lookup) -> list[str]:
    if lookup is None:
        return []
    if isinstance(lookup, Terms):
        return lookup.found_in_tokens(tokens)
    return lookup.findall(text)


def _line(lines: dict[str, int], tokens: list[list[str]], words: list[str]) -> int:
    """The index of a sentence's words among the batch's distinct ones (added when new)."""
    key = " ".join(words)
    index = lines.get(key)
    if index is None:
        index = lines[key] = len(tokens)
        tokens.append(words)
    return index


def collect(docs: list[Document], reading: Reading) -> Evidence:
    """The evidence of a batch (see the module's docstring)."""
    columns: dict[str, list] = {
        k: [] for k in ("doc", "listed", "long", "words", "named", "reported")
    }
    line_of: list[int] = []
    lines: dict[str, int] = {}  # a sentence's words, space-joined -> its index in ``distinct``
    distinct: list[list[str]] = []  # the words of the batch's distinct sentences a model reads
    cache: dict[str, list[str]] = {}  # sentence -> its words: a batch's repeats read once
    languages, found_all, judged = [], [], []
    for i, doc in enumerate(docs):
        text, language = doc.get("text") or "", doc.get("language")
        languages.append(language)
        lookup = reading.lists.get(language, reading.lists[None])
        use_models = language in reading.model_languages
        sentences = list(dict.fromkeys(split_sentences(text))) if use_models else []
        words = [cache[s] if s in cache else cache.setdefault(s, words_of(s)) for s in sentences]
        tokens = list(itertools.chain.from_iterable(words)) if use_models else (
            words_of(text) if isinstance(lookup, Terms) else [])  # fmt: skip
        found = _found(text, tokens, lookup)
        found_all.append(found)
        if not use_models:
            if not found:
                judged.append(
                    f"word lists: {language}" if lookup is not None else f"none: {language}"
                )
                continue  # nothing can be flagged: no sentences
            sentences = list(dict.fromkeys(split_sentences(text)))
            words = [words_of(s) for s in sentences] if isinstance(lookup, Terms) else []
        listed = _listed(sentences, words, lookup) if found else [False] * len(sentences)
        minimum = 0 if is_unsegmented(language) else reading.min_sentence_words
        lengths = [len(s.split()) for s in sentences]
        readable = [
            use_models and not flag and n >= reading.min_model_words
            and not (language == "en" and looks_foreign(w))
            for flag, n, w in zip(listed, lengths, words or [[]] * len(sentences), strict=True)
        ]  # fmt: skip
        judged.append(f"models: {language}" if any(readable) else
                      f"word lists: {language}" if lookup is not None else f"none: {language}")  # fmt: skip
        # a document-wide look first: most documents name no group and report nothing
        groups, reports = reading.groups.get(language), reading.reporting.get(language)
        groups = groups if groups is not None and groups.named_in_tokens(tokens) else None
        reports = reports if reports is not None and reports.named_in_tokens(tokens) else None
        for k, (flag, n, read) in enumerate(zip(listed, lengths, readable, strict=True)):
            columns["doc"].append(i)
            columns["listed"].append(flag)
            columns["long"].append(n >= minimum)
            columns["words"].append(n)
            columns["named"].append(
                read and groups is not None and groups.named_in_tokens(words[k])
            )
            columns["reported"].append(
                read and reports is not None and reports.named_in_tokens(words[k])
            )
            line_of.append(_line(lines, distinct, words[k]) if read else -1)
    return Evidence(
        doc=np.asarray(columns["doc"], dtype=np.int64),
        listed=np.asarray(columns["listed"], dtype=bool),
        long=np.asarray(columns["long"], dtype=bool),
        words=np.asarray(columns["words"], dtype=np.int64),
        named=np.asarray(columns["named"], dtype=bool),
        reported=np.asarray(columns["reported"], dtype=bool),
        line=np.asarray(line_of, dtype=np.int64),
        tokens=distinct,
        languages=languages,
        found=found_all,
        judged_by=judged,
    )
