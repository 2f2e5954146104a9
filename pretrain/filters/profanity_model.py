"""The linear profanity model of the ``alt-profanity-check`` wheel (a TF-IDF of words and a
calibrated linear SVM), read from the installed package's files without importing it.

The toxicity filter has already split a document into sentences and its sentences into
lower-cased word tokens (the group and reporting terms and the fastText models read the same
tokens), so it scores sentences from their words: :func:`probabilities_of_words` builds the
TF-IDF rows that the wheel's ``TfidfVectorizer`` would (its ``(?u)\\b\\w\\w+\\b`` tokens are
the ``\\w+`` tokens of two characters or more; stop words are outside its vocabulary) without
tokenizing the text a second time. ``tests/unit/filters/test_profanity_model.py`` holds the two equal::

    from pretrain.filters.profanity_model import sentence_probabilities
    sentence_probabilities(["Have a nice day.", "You are a fucking idiot."])  # [0.01, 0.99]
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

from pretrain.errors import ConfigError
from pretrain.filters.toxicity_classifier import words_of


@functools.cache
def load() -> tuple[Any, Any]:
    """(vectorizer, classifier) from the installed wheel's files (loaded once)."""
    import joblib

    spec = importlib.util.find_spec("profanity_check")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "ToxicityConfig(model='profanity_check') needs the alt-profanity-check wheel: "
            "pip install alt-profanity-check==1.9.1, or set model=None for word lists only"
        )
    data = os.path.join(list(spec.submodule_search_locations)[0], "data")
    return (
        joblib.load(os.path.join(data, "vectorizer.joblib")),
        joblib.load(os.path.join(data, "model.joblib")),
    )


def sentence_probabilities(sentences: list[str]) -> list[float]:
    """The model's probability that each (English) sentence is toxic."""
    return probabilities_of_words([words_of(s) for s in sentences])


def probabilities_of_words(words: list[list[str]]) -> list[float]:
    """The same, from each sentence's lower-cased ``\\w+`` tokens (:func:`words_of`)."""
    if not words:
        return []
    import numpy as np
    from scipy import sparse
    from sklearn.preprocessing import normalize

    vectorizer, classifier = load()
    vocabulary = vectorizer.vocabulary_
    # one look-up per token of the batch (its vocabulary holds no one-letter token, as the
    # vectorizer's \w\w+ pattern), then the counts per (row, column) as a canonical CSR matrix
    lengths = np.fromiter((len(tokens) for tokens in words), dtype=np.int64, count=len(words))
    rows = np.repeat(np.arange(len(words), dtype=np.int64), lengths)
    columns = np.fromiter(
        (vocabulary.get(t, -1) for tokens in words for t in tokens), dtype=np.int64,
        count=int(lengths.sum()),
    )  # fmt: skip
    known = columns >= 0
    matrix = sparse.csr_matrix(
        (np.ones(int(known.sum())), (rows[known], columns[known])),
        shape=(len(words), len(vocabulary)),
    )
    matrix.sum_duplicates()  # sorted columns, counts summed (exact: sums of ones)
    matrix.data *= vectorizer.idf_[matrix.indices]  # as TfidfTransformer.transform does
    matrix = normalize(matrix, norm="l2", copy=False)
    return classifier.predict_proba(matrix)[:, 1].tolist()
