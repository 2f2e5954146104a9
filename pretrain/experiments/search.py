"""Mixture search as RegMix does it: sample mixtures, train a proxy on each, regress, propose.

    space = SearchSpace.from_pools(pools, target_tokens=2_000_000_000, max_epochs={"web": 1.0})
    candidates = sample_mixtures(space, count=32, seed=0)          # Dirichlet around natural
    fit = fit_mixtures(candidates_weights, targets, seed=0)        # LightGBM and a linear baseline
    fit.heldout_spearman                                           # {"lightgbm": 0.9, "linear": 0.7}
    proposal = propose(fit, space, seed=0)                         # the best predicted weights

Candidates are drawn from a Dirichlet distribution centred on the natural token distribution,
with a concentration drawn per candidate (log-uniform), so some stay close to natural and some
are far from it (RegMix, ICLR 2025). A candidate must respect the epoch caps of the *target*
run: a source given weight ``w`` supplies ``w · target_tokens`` tokens, at most ``cap ×`` what
it has. The regression is judged on proxies it did not see: k-fold held-out predictions and
their Spearman correlation with what the proxies measured; the regression that ranks them
better proposes. The proposal is the mean of the top-k of many sampled mixtures by predicted
target (RegMix averages its top 100), which is smoother than the single best prediction.

Every search also trains its **anchors**, the natural and the uniform mixture, next to the
candidates: they join the fit, and they are the baselines a proposal must beat. With
``verify`` (the default) the proposal is itself trained as a proxy at the search's seeds before
it is taken (:func:`verify_proposal`): it stands only when it measures better than every anchor
and candidate; otherwise the search proposes the best mixture it measured
(``proposal.chosen_by``: ``verified``, ``measured``, or ``regression`` without ``verify``). A
regression fitted on tens of proxies can propose a corner it has not seen, and its own held-out
error, measured inside the candidates, says nothing about that corner (bench/RESULTS.md, "Data
value engine").

    report = search_report(space, config, mixtures, targets, labels)   # the fit's proposal
    report = verify_proposal(report, measured)   # measured: the proposal's proxies, mean

A search cannot always run: with one source a mixture has nothing to decide, and a target
``bpb:<source>`` needs that source. :func:`search_skip_reason` says why (``None``: it can);
whoever would run one (the demo, ``pretrain experiments search``, ``data_mixture`` with
``weights_from: searched``) asks it first, says why in one line and keeps the configured
weights.

    search_skip_reason({"web": 47_616})     # "the corpus has one source, 'web': ..."
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pretrain.errors import ConfigError, DataError
from pretrain.experiments.pools import PoolInfo
from pretrain.settings import check_types

TARGETS = ("mean_bpb", "task_likelihood")  # or "bpb:<source>", "target:<name>", "task:<task>"
NAMED_TARGETS = ("bpb:", "target:", "task:")
ANCHORS = ("natural", "uniform")  # the baselines every search trains beside its candidates


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """One mixture search: how many candidates, which proxy, which target to minimise.

    ``target`` is ``mean_bpb`` (validation bits per byte averaged over sources),
    ``bpb:<source>`` (one source) or ``task_likelihood`` (the eval tasks' probability of the
    correct answer, maximised). ``target_tokens`` is the size of the run the mixture is for;
    its epoch caps bound the candidates (``None``: every pool token once). ``anchors`` are
    trained too (those within the caps) and join the fit; with ``verify`` the proposal is
    trained as a proxy too, and taken only when it measures better than every mixture the
    search trained (else the best of those is proposed)."""

    candidates: int = 32  # sampled mixtures, one proxy each per seed (at least 6)
    seeds: tuple[int, ...] = (0,)  # each mixture is trained once per seed; the fit takes the mean
    recipe: str = "proxy_cpu"  # the proxy recipe of every candidate and anchor
    target: str = "mean_bpb"  # what to minimise: mean_bpb, bpb:<source> or task_likelihood
    target_tokens: int | None = None  # the run the mixture is for (null: every pool token once)
    max_epochs: dict[str, float] = field(default_factory=dict)  # source -> epoch cap
    default_max_epochs: float = 4.0  # the epoch cap of a source max_epochs does not name
    seed: int = 0  # seeds the sampling of the candidates and of the proposal
    top_k: int = 100  # the proposal averages the best top_k predicted mixtures
    proposal_samples: int = 100_000  # mixtures sampled for the fit to rank
    anchors: tuple[str, ...] = ANCHORS  # baselines trained beside the candidates
    verify: bool = True  # train the proposal as a proxy before taking it
    # a typo in --search.candidates would cost days of proxies
    confirm_above: int = 300  # `pretrain experiments search` launches more proxies only with --yes

    def __post_init__(self) -> None:
        check_types(self)
        if self.candidates < 6:
            raise ConfigError(
                f"SearchConfig.candidates={self.candidates}: a regression needs >= 6 proxies "
                "(RegMix trains hundreds; 32 is a small search)"
            )
        if not self.seeds:
            raise ConfigError("SearchConfig.seeds is empty; give at least one seed")
        if min(*self.seeds, self.seed) < 0:
            raise ConfigError(f"SearchConfig: seeds={self.seeds}, seed={self.seed}; use seeds >= 0")
        if self.target not in TARGETS and not self.target.startswith(NAMED_TARGETS):
            raise ConfigError(
                f"SearchConfig.target={self.target!r}: use {TARGETS}, bpb:<source>, "
                "target:<target set> or task:<task>"
            )
        if min(self.top_k, self.proposal_samples) < 1 or self.top_k > self.proposal_samples:
            raise ConfigError("SearchConfig: 1 <= top_k <= proposal_samples")
        unknown = sorted(set(self.anchors) - set(ANCHORS))
        if unknown:
            raise ConfigError(f"SearchConfig.anchors: unknown {unknown}; use some of {ANCHORS}")

    def proxies(self) -> int:
        """How many proxies the search trains at most: its candidates and anchors, per seed
        (an anchor that breaks a cap is left out; the verification proxies come later)."""
        return (self.candidates + len(self.anchors)) * len(self.seeds)

    def search_id(self) -> str:
        """Names the candidates: the settings that choose and train them (not the target)."""
        import hashlib
        import json

        keys = ("candidates", "seeds", "recipe", "target_tokens", "max_epochs",
                "default_max_epochs", "seed", "anchors")  # fmt: skip
        blob = json.dumps({k: getattr(self, k) for k in keys}, sort_keys=True, default=list)
        return "search-" + hashlib.sha256(blob.encode()).hexdigest()[:8]


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    """The sources a mixture weighs, their natural shares, and the target run's caps."""

    sources: tuple[str, ...]
    natural: tuple[float, ...]  # natural token shares, in ``sources`` order
    available_tokens: tuple[int, ...]
    target_tokens: int  # the run the mixture is for
    max_epochs: tuple[float, ...]

    @classmethod
    def from_pools(
        cls,
        pools: Sequence[PoolInfo],
        *,
        target_tokens: int | None = None,
        max_epochs: Mapping[str, float] | None = None,
        default_max_epochs: float = 4.0,
    ) -> SearchSpace:
        tokens: dict[str, int] = {}
        for p in pools:
            tokens[p.source] = tokens.get(p.source, 0) + p.tokens
        skipped = search_skip_reason(tokens)
        if skipped:
            raise DataError(f"a mixture search cannot run: {skipped}")
        sources = tuple(sorted(tokens))
        total = sum(tokens.values())
        caps = dict(max_epochs or {})
        return cls(
            sources=sources,
            natural=tuple(tokens[s] / total for s in sources),
            available_tokens=tuple(tokens[s] for s in sources),
            target_tokens=int(target_tokens or total),
            max_epochs=tuple(float(caps.get(s, default_max_epochs)) for s in sources),
        )

    def within_caps(self, weights: np.ndarray) -> np.ndarray:
        """Rows of ``weights`` (n × sources) whose every source stays within its epoch cap."""
        supply = np.asarray(self.available_tokens, dtype=float) * np.asarray(self.max_epochs)
        return np.all(weights * self.target_tokens <= supply + 1e-9, axis=-1)

    def as_dict(self, weights: np.ndarray) -> dict[str, float]:
        return {s: float(w) for s, w in zip(self.sources, weights, strict=True)}

    def vector(self, weights: Mapping[str, float]) -> np.ndarray:
        total = sum(weights.values())
        return np.array([weights.get(s, 0.0) / total for s in self.sources])


def search_skip_reason(sizes: Mapping[str, int], config: SearchConfig | None = None) -> str | None:
    """Why a mixture search cannot run over a corpus whose sources hold ``sizes`` (tokens,
    characters or documents per source: only which are non-empty matters), or ``None`` when it
    can. With ``config``, its target must name a source the corpus has."""
    present = sorted(source for source, size in sizes.items() if size > 0)
    if not present:
        return "no source of the corpus holds any data"
    if len(present) == 1:
        return (
            f"the corpus has one source, {present[0]!r}: a mixture of one source has nothing "
            "to decide"
        )
    target = config.target if config else ""
    if target.startswith("bpb:") and target.removeprefix("bpb:") not in present:
        return f"the target {target} names no source of the corpus (it has {', '.join(present)})"
    return None


def _dirichlet(
    space: SearchSpace, rng: np.random.Generator, count: int, concentration: tuple[float, float]
) -> np.ndarray:
    low, high = (math.log(c) for c in concentration)
    scale = np.exp(rng.uniform(low, high, size=(count, 1)))
    alpha = np.maximum(scale * np.asarray(space.natural) * len(space.sources), 1e-3)
    return rng.gamma(alpha)


def sample_mixtures(
    space: SearchSpace,
    *,
    count: int,
    seed: int = 0,
    concentration: tuple[float, float] = (0.3, 30.0),
    max_draws: int = 1_000_000,
) -> list[dict[str, float]]:
    """``count`` distinct candidate weightings within the target run's epoch caps."""
    if count < 1:
        raise ConfigError(f"count={count}: sample at least one candidate")
    rng = np.random.default_rng(seed)
    found: list[np.ndarray] = []
    seen: set[tuple[float, ...]] = set()
    drawn = 0
    while len(found) < count and drawn < max_draws:
        raw = _dirichlet(space, rng, 4096, concentration)
        weights = raw / np.maximum(raw.sum(axis=1, keepdims=True), 1e-12)
        drawn += len(weights)
        for row in np.round(weights[space.within_caps(weights)], 6):
            key = tuple(row.tolist())
            if key not in seen:  # a repeat would be the same experiment (same name)
                seen.add(key)
                found.append(row)
    if len(found) < count:
        raise DataError(
            f"only {len(found)} of {count} sampled mixtures respect the epoch caps of a "
            f"{space.target_tokens:,}-token run; raise the caps or lower target_tokens"
        )
    return [space.as_dict(w / w.sum()) for w in found[:count]]


@dataclass(frozen=True, kw_only=True)
class MixtureFit:
    """Regressions from weights to a target, and how well each predicts held-out proxies."""

    sources: tuple[str, ...]
    model: str  # the regression that proposes: the better held-out Spearman (ties: lightgbm)
    heldout_spearman: dict[str, float]
    heldout_predictions: dict[str, list[float]]
    targets: list[float]
    _models: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def predict(self, weights: np.ndarray, model: str | None = None) -> np.ndarray:
        return self._models[model or self.model].predict(weights)


def _lightgbm(seed: int) -> Any:
    import lightgbm

    # tiny data (tens of proxies): shallow trees, small leaves, deterministic
    return lightgbm.LGBMRegressor(
        n_estimators=300, learning_rate=0.05, num_leaves=7, min_child_samples=3,
        subsample=0.9, subsample_freq=1, colsample_bytree=1.0, reg_lambda=1.0,
        random_state=seed, deterministic=True, force_row_wise=True, n_jobs=1, verbose=-1,
    )  # fmt: skip


def _linear() -> Any:
    from sklearn.linear_model import Ridge

    return Ridge(alpha=1e-3)


def fit_mixtures(
    sources: Sequence[str],
    weights: np.ndarray,
    targets: Sequence[float],
    *,
    seed: int = 0,
    folds: int = 5,
) -> MixtureFit:
    """Fit LightGBM and a linear baseline; k-fold held-out Spearman for each. The one that
    ranks held-out proxies better proposes: with tens of proxies a tree model cannot reach
    past the candidates it saw, and a linear one can, when the proxies say it predicts."""
    from scipy.stats import spearmanr

    x, y = np.asarray(weights, dtype=float), np.asarray(targets, dtype=float)
    if len(y) < 6 or not np.all(np.isfinite(y)):
        raise DataError(f"a fit needs >= 6 finite proxy results, got {len(y)}: run more candidates")
    makers = {"lightgbm": lambda: _lightgbm(seed), "linear": _linear}
    order = np.random.default_rng(seed).permutation(len(y))
    parts = np.array_split(order, min(folds, len(y)))
    heldout: dict[str, np.ndarray] = {name: np.zeros(len(y)) for name in makers}
    for part in parts:
        train = np.setdiff1d(order, part)
        for name, make in makers.items():
            heldout[name][part] = make().fit(x[train], y[train]).predict(x[part])
    spearman = {name: float(spearmanr(pred, y).statistic) for name, pred in heldout.items()}
    models = {name: make().fit(x, y) for name, make in makers.items()}
    best = max(makers, key=lambda name: (spearman[name], name == "lightgbm"))
    return MixtureFit(
        sources=tuple(sources),
        model=best,
        heldout_spearman=spearman,
        heldout_predictions={k: v.tolist() for k, v in heldout.items()},
        targets=y.tolist(),
        _models=models,
    )


@dataclass(frozen=True, kw_only=True)
class Proposal:
    weights: dict[str, float]
    predicted: float  # the fit's prediction for ``weights`` (lower is better)
    predicted_natural: float
    sampled: int
    top_k: int


def propose(
    fit: MixtureFit,
    space: SearchSpace,
    *,
    seed: int = 0,
    samples: int = 100_000,
    top_k: int = 100,
    max_draws: int = 5_000_000,
) -> Proposal:
    """Mean of the ``top_k`` of ``samples`` sampled mixtures by predicted target (within caps;
    at most ``max_draws`` draws, so caps that almost no mixture meets end with an error)."""
    rng = np.random.default_rng(seed + 1)
    pool: list[np.ndarray] = []
    drawn = 0
    while sum(len(p) for p in pool) < samples and drawn < max_draws:
        raw = _dirichlet(space, rng, 8192, (0.3, 30.0))
        w = raw / np.maximum(raw.sum(axis=1, keepdims=True), 1e-12)
        drawn += len(w)
        pool.append(w[space.within_caps(w)])
    candidates = np.concatenate(pool)[:samples]
    if len(candidates) < top_k:
        raise DataError(
            f"only {len(candidates)} of {drawn:,} sampled mixtures respect the epoch caps of a "
            f"{space.target_tokens:,}-token run, fewer than top_k={top_k}; raise the caps or "
            "lower target_tokens"
        )
    predicted = fit.predict(candidates)
    best = candidates[np.argsort(predicted)[:top_k]].mean(axis=0)
    best = best / best.sum()
    if not space.within_caps(best[None, :])[0]:  # the mean of in-cap points is in the cap box
        raise DataError("the proposed mixture breaks an epoch cap")
    natural = np.asarray(space.natural)[None, :]
    return Proposal(
        weights=space.as_dict(best),
        predicted=float(fit.predict(best[None, :])[0]),
        predicted_natural=float(fit.predict(natural)[0]),
        sampled=len(candidates),
        top_k=top_k,
    )


def anchor_mixtures(
    space: SearchSpace, names: Sequence[str] = ANCHORS
) -> dict[str, dict[str, float]]:
    """The anchors a search trains beside its candidates, by name: ``natural`` (the token
    shares) and ``uniform`` (one share per source), each only when within the caps."""
    shapes = {"natural": np.asarray(space.natural, dtype=float),
              "uniform": np.full(len(space.sources), 1.0 / len(space.sources))}  # fmt: skip
    found = {}
    for name in names:
        weights = np.round(shapes[name], 6)
        weights = weights / weights.sum()
        if space.within_caps(weights[None, :])[0]:
            found[name] = space.as_dict(weights)
    return found


def search_mixtures(space: SearchSpace, config: SearchConfig) -> dict[str, dict[str, float]]:
    """What a search trains, by label: its sampled candidates (``c000``…), then its anchors."""
    candidates = sample_mixtures(space, count=config.candidates, seed=config.seed)
    return {
        **{f"c{i:03d}": weights for i, weights in enumerate(candidates)},
        **anchor_mixtures(space, config.anchors),
    }


def search_report(
    space: SearchSpace,
    config: SearchConfig,
    candidates: Sequence[dict[str, float]],
    targets: Sequence[float],
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Fit, held-out check and proposal for mixtures whose targets the proxies measured (the
    mean over seeds for each): what ``mixture_search`` writes to ``search.json``. ``labels``
    name the mixtures (``c000``…, and the anchors by name; default: ``c000``…)."""
    labels = list(labels or [f"c{i:03d}" for i in range(len(candidates))])
    if len(labels) != len(candidates):
        raise ConfigError(f"{len(labels)} labels for {len(candidates)} mixtures")
    weights = np.array([space.vector(c) for c in candidates])
    fit = fit_mixtures(space.sources, weights, targets, seed=config.seed)
    proposals = {
        name: propose(dataclasses.replace(fit, model=name), space, seed=config.seed,
                      samples=config.proposal_samples, top_k=config.top_k)
        for name in fit.heldout_spearman
    }  # fmt: skip
    regression = proposals[fit.model]
    best = int(np.argmin(targets))
    rows = [
        {"label": label, "weights": dict(c), "target": float(t)}
        for label, c, t in zip(labels, candidates, targets, strict=True)
    ]
    return {
        "search_id": config.search_id(),
        "target": config.target,
        "sources": list(space.sources),
        "natural": space.as_dict(np.asarray(space.natural)),
        "target_tokens": space.target_tokens,
        "candidates": rows,
        "anchors": {r["label"]: r["target"] for r in rows if r["label"] in ANCHORS},
        "heldout_spearman": fit.heldout_spearman,
        "heldout_predictions": fit.heldout_predictions,
        "model": fit.model,
        "proposal": {
            "weights": regression.weights,
            "chosen_by": "regression",  # verify_proposal decides, when the search verifies
            "reason": f"the {fit.model} fit's best predicted mixture (not trained)",
            "predicted": regression.predicted,
            "predicted_natural": regression.predicted_natural,
            "sampled": regression.sampled,
            "top_k": regression.top_k,
        },
        "regression_proposal": regression.weights,
        "proposals": {name: p.weights for name, p in proposals.items()},  # by each regression
        "best_candidate": rows[best],  # the best measured mixture, anchors included
    }


def verify_proposal(report: dict[str, Any], measured: float) -> dict[str, Any]:
    """``report`` with its proposal decided by a measurement: ``measured`` is the regression's
    proposal's target, trained as a proxy at the search's seeds (their mean). It stands when
    it beats every mixture the search measured; otherwise the best of them is proposed."""
    best = report["best_candidate"]
    won = measured < best["target"]
    proposal = {
        **report["proposal"],
        "weights": dict(report["regression_proposal"] if won else best["weights"]),
        "chosen_by": "verified" if won else "measured",
        "measured": measured,
        "best_measured": best["label"],
        "reason": (
            f"the {report['model']} fit's proposal measured {measured:.4f} as a proxy (predicted "
            f"{report['proposal']['predicted']:.4f}); the best mixture measured before it, "
            f"{best['label']}, {best['target']:.4f}: "
            + ("the proposal stands" if won else f"{best['label']} is proposed instead")
        ),
    }
    return {**report, "proposal": proposal}


def fit_chart_png(report: dict[str, Any]) -> bytes:
    """Held-out predicted vs measured target, LightGBM and the linear baseline."""
    from pretrain.charts import figure_png, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 4), dpi=100)
    measured = [c["target"] for c in report["candidates"]]
    for name, marker in (("lightgbm", "o"), ("linear", "x")):
        rho = report["heldout_spearman"][name]
        ax.scatter(measured, report["heldout_predictions"][name], marker=marker,
                   label=f"{name} (held-out Spearman {rho:.2f})")  # fmt: skip
    low, high = min(measured), max(measured)
    ax.plot([low, high], [low, high], color="grey", linewidth=0.8)
    ax.set_xlabel(f"measured {report['target']}")
    ax.set_ylabel("predicted (held out)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return figure_png(fig)


def proposed_weights(search_dir: str) -> dict[str, float]:
    """The weights the latest ``mixture_search`` proposes (``search.json``)."""
    from pretrain import storage
    from pretrain.experiments.records import read_record

    where = storage.join(search_dir, "search.json")
    if not storage.exists(where):
        raise DataError(
            f"weights_from='searched' but {where} does not exist: launch a mixture search "
            "(the launch_search job or `pretrain experiments search`), then materialize "
            "mixture_search"
        )
    return read_record(where, _proposal, "a mixture search report")


def _proposal(data: Any) -> dict[str, float]:
    weights = data["proposal"]["weights"]
    return {str(k): float(v) for k, v in weights.items()}
