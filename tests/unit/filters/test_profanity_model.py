"""The profanity model scored from word tokens gives what the wheel's own vectorizer gives.

``pretrain.filters.profanity_model.probabilities_of_words`` builds the TF-IDF rows itself (the
filter has the words already); the wheel's ``TfidfVectorizer`` on the raw sentences is the
reference. Sentences here are our own.
"""

from __future__ import annotations

import numpy as np

from pretrain.filters.profanity_model import load, probabilities_of_words, sentence_probabilities
from pretrain.filters.toxicity_classifier import words_of

SENTENCES = [
    "Have a nice day at the lake.",
    "You are a fucking idiot and everyone knows it!",
    "What the HELL is wrong with you, you damn moron?",
    "I I a a x y z",  # one-letter tokens: the vectorizer's pattern skips them
    "The and of to in is it",  # stop words only: outside the vocabulary
    "Ça va très bien, merci — naïve café déjà vu.",  # non-ASCII word characters
    "shit shit shit shit",  # a repeated word counts four times
    "",
    "Numbers 42 and 7 and snake_case_words stay tokens.",
]


def test_scores_from_words_equal_the_wheels_vectorizer() -> None:
    vectorizer, classifier = load()
    reference = classifier.predict_proba(vectorizer.transform(SENTENCES))[:, 1]
    ours = probabilities_of_words([words_of(s) for s in SENTENCES])
    assert np.array_equal(np.asarray(ours), reference)  # bit for bit, not approximately
    assert sentence_probabilities(SENTENCES) == ours
    assert ours[1] > 0.9 > 0.1 > ours[0]  # and the model still tells an insult from a lake
    assert probabilities_of_words([]) == []
