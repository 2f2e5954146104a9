"""How the shipped toxicity model's rule and threshold are chosen: leave-one-source-out.

A model tuned on the sources it is measured on learns their style, not what toxicity is, so
``scripts/train_toxicity_model.py`` judges a candidate only where it was not tuned. For every
toxic source (a *fold*), a model is trained without it; for every *rule* (the structure of the
decision: the profanity model's thresholds, how many and what share of flagged sentences drop
a document), the shipped model's threshold is *calibrated* on clean text only — the lowest of
``THRESHOLDS`` that keeps every calibration set within its bound (``BOUNDS``: web pages and
READMEs 2 in 569, books and articles none, threads of neutral statements about groups at most
0.35) — and the recall is measured on the left-out source. :func:`choose` keeps the recipe and
rule whose *worst* held-out set is best (then the best mean): a rule that is great on three
sources and blind on the fourth loses to one that holds on all of them::

    rule = rules()[0]
    chosen, shares = calibrate({"web": web_evidence}, rule, bounds={"web": 0.0036})
    chosen.shipped  # the lowest threshold that flags at most 0.36% of the web pages
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pretrain.filters.toxicity_evidence import Evidence, Thresholds, decide

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 0.995)  # the shipped model's
# the rules: the profanity model's threshold and its threshold for a sentence naming a group,
# the flagged sentences needed and their share, the words a sentence needs for a model to read it
RULES: dict[str, tuple] = {
    "sentence_threshold": (0.5, 0.7, 0.9),
    "identity_threshold": (None, 0.2, 0.3),
    "min_toxic_sentences": (1, 2, 3),
    "max_toxic_share": (0.03, 0.06, 0.12, 0.2),
    "min_model_words": (2, 4),
}
# calibration set -> the largest share of it the rule may flag
BOUNDS = {"web": 0.0036, "package_docs": 0.0036, "books": 0.0, "wikipedia": 0.0,
          "neutral_group_threads": 0.35}  # fmt: skip
REPORTED_THRESHOLD = 0.9  # ToxicityConfig.reported_threshold's default, in every rule


def rules() -> list[Thresholds]:
    """Every rule of ``RULES`` (the shipped threshold is left to :func:`calibrate`)."""
    out = []
    for values in itertools.product(*RULES.values()):
        s = dict(zip(RULES, values, strict=True))
        out.append(rule_of(s))
    return out


def rule_of(settings: dict[str, Any]) -> Thresholds:
    """The rule of ``ToxicityConfig``-named settings (a card's thresholds)."""
    return Thresholds(
        shipped=settings.get("shipped_threshold"),
        profanity=settings["sentence_threshold"],
        profanity_identity=settings["identity_threshold"],
        profanity_reported=REPORTED_THRESHOLD,
        min_toxic_sentences=settings["min_toxic_sentences"],
        max_toxic_share=settings["max_toxic_share"],
        min_model_words=settings["min_model_words"],
    )


def settings_of(t: Thresholds) -> dict[str, Any]:
    """A rule as ``ToxicityConfig`` names its settings (the card's ``thresholds``)."""
    return {"shipped_threshold": t.shipped, "sentence_threshold": t.profanity,
            "identity_threshold": t.profanity_identity, "max_toxic_share": t.max_toxic_share,
            "min_toxic_sentences": t.min_toxic_sentences,
            "min_model_words": t.min_model_words}  # fmt: skip


def flagged_share(evidence: Evidence, thresholds: Thresholds) -> float:
    dropped = decide(evidence, thresholds)[2]
    return float(dropped.mean()) if len(dropped) else 0.0


def calibrate(
    calibration: dict[str, Evidence], rule: Thresholds, *,
    bounds: dict[str, float] = BOUNDS, thresholds: tuple[float, ...] = THRESHOLDS,
) -> tuple[Thresholds | None, dict[str, float]]:  # fmt: skip
    """The rule with the lowest shipped threshold that keeps every calibration set within its
    bound, and the shares it flags there (None, and the strictest's shares, when none does)."""
    shares: dict[str, float] = {}
    for threshold in thresholds:
        candidate = replace(rule, shipped=threshold)
        shares = {name: round(flagged_share(ev, candidate), 4) for name, ev in calibration.items()}
        if all(shares[name] <= bound for name, bound in bounds.items() if name in shares):
            return candidate, shares
    return None, shares


@dataclass(frozen=True)
class FoldResult:
    thresholds: Thresholds | None  # the rule with its calibrated shipped threshold
    recall: dict[str, float]  # held-out set -> share flagged
    calibration: dict[str, float]  # calibration set -> share flagged


def run_fold(
    held_out: dict[str, Evidence], calibration: dict[str, Evidence], rule: Thresholds,
    **calibrate_options: Any,
) -> FoldResult:  # fmt: skip
    """One fold for one rule, with the fold model's scores already in the evidence: no
    threshold keeps the calibration in bounds -> recall 0 (the rule cannot be used)."""
    chosen, shares = calibrate(calibration, rule, **calibrate_options)
    recall = {n: round(flagged_share(ev, chosen), 4) if chosen else 0.0
              for n, ev in held_out.items()}  # fmt: skip
    return FoldResult(chosen, recall, shares)


def worst_and_mean(results: list[FoldResult]) -> tuple[float, float]:
    """The worst and the mean recall over every held-out set of every fold."""
    values = [v for r in results for v in r.recall.values()]
    return round(min(values), 4), round(float(np.mean(values)), 4)


def choose(results: dict[str, dict[str, list[FoldResult]]]) -> tuple[str, int, float, float]:
    """(recipe, rule index, worst, mean): recipe -> fold -> one result per rule; the best worst
    held-out recall, then the best mean, then the earlier recipe and rule."""
    best: tuple[str, int, float, float] | None = None
    for recipe, folds in results.items():
        for i in range(len(next(iter(folds.values())))):
            worst, mean = worst_and_mean([per_rule[i] for per_rule in folds.values()])
            if best is None or (worst, mean) > (best[2], best[3]):
                best = (recipe, i, worst, mean)
    if best is None:
        raise ValueError("choose() needs at least one recipe with one rule")
    return best
