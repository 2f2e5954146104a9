"""Mixture configuration: weights, token budget, epoch caps, quality exponent, curriculum.

    from pretrain.mixture import CurriculumStage, MixtureConfig, llama2_like_mixture
    config = llama2_like_mixture(token_budget=2_000_000_000)       # web 67 %, caps web<=1, others<=4
    config = MixtureConfig(
        weights={"web": 0.8, "code": 0.2},
        token_budget=50_000_000, chars_per_token=4.0,               # budget in tokens -> characters
        quality_alpha=1.0,                                          # P(doc) ∝ quality_score**1
        stages=(
            CurriculumStage(name="main", fraction=0.9),             # uses ``weights``
            CurriculumStage(name="anneal", fraction=0.1, weights={"web": 0.5, "code": 0.5}),
        ),
    )

The mixture runs before the tokenizer exists, so a token budget is turned into characters
with ``chars_per_token`` (about 4 for English byte-level BPE; the packing stats report the
real number). ``token_budget_chars`` sets the character budget directly. With neither, the
budget is every available training character (natural shares: one epoch of everything).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pretrain.decontam import DecontamConfig
from pretrain.errors import ConfigError
from pretrain.hashset import HASH_BUCKETS, hash_score
from pretrain.settings import check_types

DEFAULT_MAX_EPOCHS = 4.0
WEIGHT_ORIGINS = ("config", "searched")
LLAMA2_LIKE_WEIGHTS = {
    "web": 0.67,
    "code": 0.10,
    "encyclopedic": 0.08,
    "books": 0.07,
    "papers": 0.045,
    "qa": 0.035,
}


def is_val(doc_id: str, seed: int, val_fraction: float) -> bool:
    """The hash rule alone (without the ``min_val_docs`` top-up)."""
    return hash_score(seed, doc_id) < round(val_fraction * HASH_BUCKETS)


def _check_weights(weights: dict[str, float] | None, where: str) -> None:
    if weights is None:
        return
    if not weights:
        raise ConfigError(f"{where} is empty; pass None for natural shares")
    bad = {k: w for k, w in weights.items() if not w >= 0.0}
    if bad:
        raise ConfigError(f"{where} must be >= 0, got {bad}")
    if sum(weights.values()) <= 0:
        raise ConfigError(f"{where} sum to 0; give at least one source > 0")


@dataclass(frozen=True, kw_only=True)
class CurriculumStage:
    """One stage of a curriculum: a share of the budget with its own weights.

    Stages are trained in list order; ``weights=None`` uses ``MixtureConfig.weights``."""

    name: str
    fraction: float
    weights: dict[str, float] | None = None

    def __post_init__(self) -> None:
        check_types(self)
        if not self.name:
            raise ConfigError("CurriculumStage.name must be non-empty, e.g. 'anneal'")
        if not 0.0 < self.fraction <= 1.0:
            raise ConfigError(
                f"CurriculumStage '{self.name}': fraction={self.fraction} must be in (0, 1] "
                "(its share of the token budget; all stages sum to 1)"
            )
        _check_weights(self.weights, f"CurriculumStage '{self.name}' weights")


@dataclass(frozen=True, kw_only=True)
class MixtureConfig:
    """How to split, weight, cap, decontaminate and stage the sources."""

    weights: dict[str, float] | None = None
    val_fraction: float = 0.05
    min_val_docs: int = 1
    seed: int = 0
    max_epochs: dict[str, float] = field(default_factory=lambda: {"web": 1.0})
    default_max_epochs: float = DEFAULT_MAX_EPOCHS
    token_budget: int | None = None
    chars_per_token: float = 4.0
    token_budget_chars: int | None = None
    quality_alpha: float = 0.0
    stages: tuple[CurriculumStage, ...] = ()
    decontam: DecontamConfig | None = field(
        default_factory=lambda: DecontamConfig(skip_missing=True)
    )  # None: no 13-gram decontamination
    # the confirmed quarantine also removes the exact/near duplicates of its documents
    # (members of their ``dedup_clusters`` clusters), so a re-dedup cannot bring them back
    quarantine_duplicates: bool = True
    # "searched": the weights the latest mixture_search proposes (``weights`` must stay unset)
    weights_from: str = "config"
    include_held_groups: bool = False  # shard groups admission held for review stay in

    def __post_init__(self) -> None:
        check_types(self)
        _check_weights(self.weights, "MixtureConfig.weights")
        if self.weights_from not in WEIGHT_ORIGINS:
            raise ConfigError(
                f"MixtureConfig.weights_from={self.weights_from!r}: use one of {WEIGHT_ORIGINS}"
            )
        if self.weights_from == "searched" and self.weights is not None:
            raise ConfigError(
                "MixtureConfig: weights_from='searched' takes the mixture_search proposal; "
                "leave weights unset (or use weights_from='config' with your weights)"
            )
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(
                f"MixtureConfig.val_fraction={self.val_fraction} must be in [0, 1), e.g. 0.05"
            )
        if self.min_val_docs < 0:
            raise ConfigError(f"MixtureConfig.min_val_docs={self.min_val_docs} must be >= 0")
        caps = {"default_max_epochs": self.default_max_epochs, **self.max_epochs}
        bad_caps = {k: v for k, v in caps.items() if not v >= 1.0}
        if bad_caps:
            raise ConfigError(
                f"MixtureConfig epoch caps must be >= 1.0 (1.0 = never repeat), got {bad_caps}"
            )
        for name in ("token_budget", "token_budget_chars"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(
                    f"MixtureConfig.{name} must be positive or None (None = as many train "
                    "characters as the sources hold)"
                )
        if self.token_budget is not None and self.token_budget_chars is not None:
            raise ConfigError(
                "set MixtureConfig.token_budget (tokens) or token_budget_chars, not both"
            )
        if not self.chars_per_token > 0:
            raise ConfigError("MixtureConfig.chars_per_token must be > 0, e.g. 4.0 for English")
        if not self.quality_alpha >= 0.0:
            raise ConfigError(
                f"MixtureConfig.quality_alpha={self.quality_alpha} must be >= 0 (0 = uniform)"
            )
        self._check_stages()

    def _check_stages(self) -> None:
        if not self.stages:
            return
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ConfigError(f"MixtureConfig.stages names must be distinct, got {names}")
        total = sum(s.fraction for s in self.stages)
        if abs(total - 1.0) > 1e-6:
            raise ConfigError(
                f"MixtureConfig.stages fractions sum to {total:.6f}; make them sum to 1.0"
            )

    def epoch_cap(self, source: str) -> float:
        return self.max_epochs.get(source, self.default_max_epochs)

    def budget_chars(self) -> int | None:
        """The character budget, or None for 'everything available'."""
        if self.token_budget is not None:
            return round(self.token_budget * self.chars_per_token)
        return self.token_budget_chars

    def stage_list(self) -> tuple[CurriculumStage, ...]:
        """The stages, or one implicit 'main' stage covering the whole budget."""
        return self.stages or (CurriculumStage(name="main", fraction=1.0),)


def llama2_like_mixture(token_budget: int | None = None, **overrides: Any) -> MixtureConfig:
    """LLaMA-like source shares (web ≈ 67 %) with web capped at 1 epoch, others at 4."""
    caps = {"web": 1.0, **{s: 4.0 for s in LLAMA2_LIKE_WEIGHTS if s != "web"}}
    kwargs = {"weights": dict(LLAMA2_LIKE_WEIGHTS), "max_epochs": caps}
    return MixtureConfig(token_budget=token_budget, **{**kwargs, **overrides})
