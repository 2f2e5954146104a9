"""Leave-one-source-out folds, their documents, and the selection over recipes and rules.

One definition for ``scripts/train_toxicity_model.py`` (which selects the shipped recipe and
rule with it) and ``bench/cleaning_toxicity.py`` (which reports it); the choosing itself is
:mod:`pretrain.filters.toxicity_selection` (calibration on clean text, worst held-out recall).
For every toxic source (``FOLDS``) a model is trained on the ``train`` split of the *other*
sources and measured on every document of the left-out one:

- ``stormfront``: the forum's 10-post threads and the same threads as scraped forum pages;
- ``davidson``: 10-tweet threads;
- ``hatecheck``: its hateful test cases, one a document;
- ``toxigen``: its hateful seed statements, one a document;
- ``implicit``: ToxiGen's hateful statements and HateCheck's implicit derogation
  (``derog_impl_h``), alone and as threads of 5 among 5 neutral statements about groups, with
  *both* sources left out of training.

Calibration sets: ``bench/_toxicity_clean.py`` (clean text only; never evaluated on)::

    selection = Selection(evidence_sets(), rules())
    selection.add("fasttext_sentences", "stormfront", candidate)   # per recipe and fold
    recipe, rule = selection.best()
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from _toxicity_data import hatecheck_rows, toxigen_rows
from _toxicity_sets import (
    implicit_statements,
    statement_threads,
    stormfront_threads,
    twitter_threads,
)

from pretrain.filters.toxicity_evidence import Evidence, Thresholds
from pretrain.filters.toxicity_selection import (
    BOUNDS,
    RULES,
    FoldResult,
    calibrate,
    choose,
    run_fold,
    settings_of,
    worst_and_mean,
)

# fold -> (sources left out of training, the sets its recall is measured on)
FOLDS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "stormfront": (frozenset({"stormfront"}), ("stormfront_threads", "stormfront_forum_pages")),
    "davidson": (frozenset({"davidson"}), ("twitter_threads",)),
    "hatecheck": (frozenset({"hatecheck"}), ("hatecheck_hateful",)),
    "toxigen": (frozenset({"toxigen"}), ("toxigen_hateful",)),
    "implicit": (frozenset({"toxigen", "hatecheck"}),
                 ("implicit_hate_statements", "implicit_hate_threads")),
}  # fmt: skip
MODEL_LANGUAGES = frozenset({"en"})


def held_out_sets() -> dict[str, list[dict]]:
    """name -> toxic documents (every split) of the sets the folds are measured on."""

    def one_each(rows: list[dict]) -> list[dict]:
        return [{"id": r["id"], "split": r["split"], "text": r["text"]} for r in rows]

    return {
        "stormfront_threads": stormfront_threads(),
        "stormfront_forum_pages": stormfront_threads(page=True),
        "twitter_threads": twitter_threads(),
        "hatecheck_hateful": one_each([r for r in hatecheck_rows() if r["toxic"]]),
        "toxigen_hateful": one_each([r for r in toxigen_rows() if r["toxic"]]),
        "implicit_hate_statements": implicit_statements(),
        "implicit_hate_threads": statement_threads(hateful=5),
    }


def evidence_sets() -> tuple[dict[str, Evidence], dict[str, Evidence]]:
    """(calibration, held-out toxic) evidence as the filter reads it without a shipped model
    (the profanity model's scores in place; each candidate adds its own), the language from
    LID-176 as the filter stage annotates it."""
    from _toxicity_clean import calibration_sets

    from pretrain.filters.langid import predict
    from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter

    # every sentence of 2 words or more read (the rules choose how many words a model needs)
    reader = ToxicityFilter(
        ToxicityConfig(shipped_model=None, min_model_words=min(RULES["min_model_words"]))
    )
    out = []
    for sets in (calibration_sets(), held_out_sets()):
        for docs in sets.values():
            for doc, (language, _) in zip(docs, predict([d["text"] for d in docs]), strict=True):
                doc["language"] = language
        out.append({name: reader.evidence(docs) for name, docs in sets.items()})
    return out[0], out[1]


class Selection:
    """Recipes x folds x rules: what each reached, what it cost, and the choice."""

    def __init__(
        self, sets: tuple[dict[str, Evidence], dict[str, Evidence]], rules: list[Thresholds]
    ) -> None:
        self.calibration, self.toxic = sets
        self.rules = rules
        self.results: dict[str, dict[str, list[FoldResult]]] = {}
        self.costs: dict[str, dict[str, Any]] = {}

    def add(self, recipe: str, fold: str, candidate: Any) -> None:
        """Score the fold's sets with ``candidate`` (trained without the fold's sources:
        ``probabilities_of_words``, ``train_s``, ``bytes``) and run every rule."""
        held = {n: self.toxic[n] for n in FOLDS[fold][1]}
        start = time.perf_counter()
        for evidence in [*self.calibration.values(), *held.values()]:
            evidence.score("shipped", candidate.probabilities_of_words, MODEL_LANGUAGES)
        seconds = time.perf_counter() - start
        sentences = sum(len(e.tokens) for e in [*self.calibration.values(), *held.values()])
        cost = self.costs.setdefault(recipe, {"train_s": [], "sentences_per_s": []})
        cost["bytes"] = candidate.bytes
        cost["train_s"].append(candidate.train_s)
        cost["sentences_per_s"].append(sentences / seconds)
        self.results.setdefault(recipe, {})[fold] = [
            run_fold(held, self.calibration, rule) for rule in self.rules
        ]

    def fold_summary(self, recipe: str, fold: str) -> dict[str, Any]:
        """The fold's best rule (by its worst set), for progress lines."""
        best = max(self.results[recipe][fold], key=lambda r: min(r.recall.values()))
        return {"best_recall": best.recall,
                "rule": settings_of(best.thresholds) if best.thresholds else None}  # fmt: skip

    def best(self) -> tuple[str, int]:
        """(recipe, rule index) with the best worst held-out recall, then the best mean."""
        recipe, rule, _, _ = choose(self.results)
        return recipe, rule

    def calibrate_final(self, model: Any, rule: int) -> tuple[dict, dict]:
        """The shipped model's settings for the chosen rule, and what it flags in calibration."""
        for evidence in self.calibration.values():
            evidence.score("shipped", model.probabilities_of_words, MODEL_LANGUAGES)
        chosen, shares = calibrate(self.calibration, self.rules[rule])
        if chosen is None:
            raise SystemExit(f"no shipped threshold keeps the calibration in bounds: {shares}")
        return settings_of(chosen), shares

    def timings(self) -> dict[str, dict[str, float]]:
        """Per recipe: training seconds per fold and sentences scored per second (medians;
        printed, not in the card, which a rerun must write byte for byte)."""
        return {name: {"train_s_per_fold": round(float(np.median(c["train_s"])), 1),
                       "sentences_per_s": round(float(np.median(c["sentences_per_s"])))}
                for name, c in self.costs.items()}  # fmt: skip

    def report(self, recipe: str, rule: int) -> dict[str, Any]:
        """The card's account: every recipe's reach (at its own best rule) and file size, and
        the shipped rule's threshold and held-out recall per fold."""
        recipes = {}
        for name, folds in self.results.items():
            _, i, worst, mean = choose({name: folds})
            recipes[name] = {"worst": worst, "mean": mean, "rule": settings_of(self.rules[i]),
                             "bytes": self.costs[name]["bytes"]}  # fmt: skip
        folds = {}
        for fold, per_rule in self.results[recipe].items():
            r = per_rule[rule]
            folds[fold] = {"shipped_threshold": r.thresholds.shipped if r.thresholds else None,
                           "recall": r.recall, "calibration": r.calibration}  # fmt: skip
        worst, mean = worst_and_mean([per_rule[rule] for per_rule in self.results[recipe].values()])
        return {"recipes": recipes, "bounds": BOUNDS,
                "shipped": {"recipe": recipe, "worst": worst, "mean": mean, "folds": folds}}  # fmt: skip
