"""What an experiment is: a data variant, a proxy recipe and a seed, each a frozen dataclass.

    variant = DataVariant(weights={"web": 0.5, "news": 0.3, "books": 0.2})
    spec = ExperimentSpec(name=experiment_name("mix", variant, 0, "proxy_cpu"), variant=variant,
                          recipe="proxy_cpu", seed=0)
    spec.to_json()                    # what proxy_runs[name] reads (experiments/<name>/spec.json)

A **data variant** says which training data a proxy sees, as a view over the campaign's
token pools (one pool per shard group, :mod:`pretrain.experiments.pools`): ``weights`` over
sources (``None``: the natural token distribution), shard groups added (``include_groups``:
groups not yet admitted) or removed (``exclude_groups``), and ``filter`` overrides of the
filter stage's settings (an ablation: those shard groups are filtered again with them and
pooled apart). A **proxy recipe** (:data:`PROXY_RECIPES`) fixes the model, the batch, the
learning rate and the token budget. Only the seed changes between the repeats of one variant.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from pretrain.errors import ConfigError
from pretrain.experiments.records import json_object
from pretrain.model.recipes import get_recipe
from pretrain.settings import check_types

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")
# who made an experiment; "start": a proxy that anneals continue (registry.start_spec)
KINDS = ("manual", "search", "admission", "ablation", "start")


@dataclass(frozen=True, kw_only=True)
class ProxyRecipe:
    """A small model and how long it trains: shapes, batch, learning rate, token budget.

    ``token_budget`` is the number of training tokens (a whole number of steps of
    ``global_batch_sequences`` sequences of the pools' context). ``device`` is where it trains
    and is evaluated (``cuda`` recipes need a GPU).

    An **anneal** recipe (``starts_from`` names another recipe) trains no model from scratch:
    it continues a finished proxy of that recipe (the experiment's ``base``) for its own
    ``token_budget``, with a fresh optimizer and its own schedule (a short warmup, then a linear
    decay: ``schedule="wsd"``, ``decay_fraction=1.0``). Arms that continue the same base differ
    only by their data, which is what an admission compares (OLMo 2's micro-anneals)."""

    name: str
    model: str  # a model recipe (pretrain.model.recipes), e.g. "proxy_64x2"
    micro_batch_size: int
    global_batch_sequences: int
    lr: float
    warmup_steps: int
    token_budget: int
    device: str = "cpu"
    max_val_sequences: int = 64  # per source
    max_target_sequences: int = 512  # per target set: a yardstick is scored on its breadth
    max_task_examples: int = 200  # per eval task
    schedule: str = "cosine"  # the LR schedule (OptimConfig.schedule): "cosine" or "wsd"
    decay_fraction: float = 0.2  # WSD: the share of the steps that decays (1.0: linear decay)
    starts_from: str | None = None  # an anneal: continues the proxy of this recipe (see below)
    # the recipe to try when this one cannot tell an admission's floor from its reference
    next_scale: str | None = None

    def __post_init__(self) -> None:
        check_types(self)

        if self.device not in ("cpu", "cuda"):
            raise ConfigError(f"ProxyRecipe.device={self.device!r}; use 'cpu' or 'cuda'")
        if self.schedule not in ("cosine", "wsd"):
            raise ConfigError(f"ProxyRecipe.schedule={self.schedule!r}; use 'cosine' or 'wsd'")
        if self.global_batch_sequences % self.micro_batch_size:
            raise ConfigError(
                f"ProxyRecipe {self.name}: global_batch_sequences={self.global_batch_sequences} "
                f"must be a multiple of micro_batch_size={self.micro_batch_size}"
            )
        if min(self.token_budget, self.lr, self.micro_batch_size) <= 0:
            raise ConfigError(f"ProxyRecipe {self.name}: sizes, lr and token_budget must be > 0")
        get_recipe(self.model)  # a known model recipe (ConfigError naming the choices)


# CPU, tuned by bench/data_roi.py (5 real sources, a 1k-token basis vocabulary, one core each):
# - proxy_cpu (search candidates): 172k parameters, 524k tokens, ~20 CPU-seconds of training;
#   cosine at this length decayed the LR before the model left the sources' unigram plateau.
# - proxy_cpu_admit (admission): the same model on 2.1M tokens, ~75 CPU-seconds; at 524k tokens
#   a proxy's seed-to-seed spread (0.03-0.1 bits/byte) hid the harm of shuffled words, at 2.1M
#   it was 0.01 and shuffled words cost +0.05-0.07.
# - proxy_cpu_anneal (admission, AdmissionConfig's default): 524k tokens that continue a
#   proxy_cpu_admit proxy of the admitted corpus with a linear decay; both arms of a seed start
#   from the same weights, so the paired change's spread over seeds fell from 0.01-0.1 bits/byte
#   (from scratch) to under 0.005 (bench/RESULTS.md, "Data value engine").
# - proxy_cpu_mix_anneal (search candidates): the same anneal on 262k tokens.
# - proxy_cpu_large: the larger run that checks a search's mixture, 18.9x proxy_cpu's FLOPs
#   (0.94M parameters, 1.97M tokens), so that 10 search proxies stay under 5% of 11 such runs.
# GPU: RegMix's 1M-scale proxies are CPU-sized here; 20M and 150M follow DataDecide's ladder.
# what the CPU recipes share: batches of 16 sequences, a WSD schedule; an anneal also decays
# linearly to the end (it names the recipe it starts from); the tiny ones evaluate less
_CPU: dict[str, Any] = {"micro_batch_size": 16, "global_batch_sequences": 16, "schedule": "wsd"}
_ANNEAL: dict[str, Any] = {**_CPU, "decay_fraction": 1.0}
_TINY: dict[str, Any] = {"model": "proxy_64x2_4h", "max_val_sequences": 32, "max_task_examples": 50}
PROXY_RECIPES: dict[str, ProxyRecipe] = {
    r.name: r
    for r in (
        ProxyRecipe(name="proxy_cpu", model="proxy_64x2", lr=1e-2, warmup_steps=10,
                    token_budget=524_288, **_CPU),
        ProxyRecipe(name="proxy_cpu_admit", model="proxy_64x2", lr=1e-2, warmup_steps=20,
                    token_budget=2_097_152, **_CPU),
        ProxyRecipe(name="proxy_cpu_large", model="proxy_128x4", lr=5e-3, warmup_steps=20,
                    token_budget=1_966_080, **_CPU),
        ProxyRecipe(name="proxy_cpu_anneal", model="proxy_64x2", lr=3e-3, warmup_steps=8,
                    token_budget=524_288, starts_from="proxy_cpu_admit",
                    next_scale="proxy_cpu_anneal_2x", **_ANNEAL),
        # the admission ladder (bench/data_roi.py --ladder): twice the anneal's tokens, then a
        # wider model (its own start), then the GPU recipes
        ProxyRecipe(name="proxy_cpu_anneal_2x", model="proxy_64x2", lr=3e-3, warmup_steps=8,
                    token_budget=1_048_576, starts_from="proxy_cpu_admit",
                    next_scale="proxy_cpu_anneal_wide", **_ANNEAL),
        ProxyRecipe(name="proxy_cpu_admit_wide", model="proxy_128x2", lr=5e-3, warmup_steps=20,
                    token_budget=2_097_152, **_CPU),
        ProxyRecipe(name="proxy_cpu_anneal_wide", model="proxy_128x2", lr=2e-3, warmup_steps=8,
                    token_budget=524_288, starts_from="proxy_cpu_admit_wide",
                    next_scale="proxy_gpu_20m", **_ANNEAL),
        ProxyRecipe(name="proxy_cpu_stable", model="proxy_64x2", lr=1e-2, warmup_steps=20,
                    token_budget=1_048_576, **{**_CPU, "decay_fraction": 0.01}),
        ProxyRecipe(name="proxy_cpu_branch", model="proxy_64x2", lr=1e-2, warmup_steps=10,
                    token_budget=1_048_576, starts_from="proxy_cpu_stable", **_CPU),
        ProxyRecipe(name="proxy_cpu_mix_anneal", model="proxy_64x2", lr=3e-3, warmup_steps=4,
                    token_budget=262_144, starts_from="proxy_cpu_admit",
                    next_scale="proxy_cpu_anneal", **_ANNEAL),
        # seconds on one core: for tests and smoke runs, too small to decide real data
        ProxyRecipe(name="proxy_tiny", lr=3e-3, warmup_steps=8, token_budget=80_000,
                    micro_batch_size=16, global_batch_sequences=16, **_TINY),
        ProxyRecipe(name="proxy_tiny_anneal", lr=1e-3, warmup_steps=2, token_budget=40_000,
                    starts_from="proxy_tiny", next_scale="proxy_cpu_anneal", **_ANNEAL, **_TINY),
        ProxyRecipe(
            name="proxy_gpu_20m", model="proxy_20m",
            micro_batch_size=64, global_batch_sequences=128, lr=2e-3, warmup_steps=100,
            token_budget=400_000_000, device="cuda", max_val_sequences=512,
            max_task_examples=1000, next_scale="proxy_gpu_150m",
        ),
        ProxyRecipe(
            name="proxy_gpu_150m", model="proxy_150m",
            micro_batch_size=32, global_batch_sequences=256, lr=1e-3, warmup_steps=300,
            token_budget=3_000_000_000, device="cuda", max_val_sequences=1024,
            max_task_examples=2000,
        ),
    )
}  # fmt: skip


def check_anneal_recipes(recipes: dict[str, ProxyRecipe]) -> None:
    """Every anneal recipe continues a known recipe with the same model."""
    for recipe in recipes.values():
        if recipe.starts_from is None:
            continue
        base = recipes.get(recipe.starts_from)
        if base is None or base.starts_from is not None:
            raise ConfigError(
                f"ProxyRecipe {recipe.name} starts from {recipe.starts_from!r}, which is not a "
                "recipe trained from scratch"
            )
        if base.model != recipe.model or base.device != recipe.device:
            raise ConfigError(
                f"ProxyRecipe {recipe.name} starts from {base.name}: the model shapes "
                f"({recipe.model} vs {base.model}) and the device must be the same"
            )


check_anneal_recipes(PROXY_RECIPES)
_unknown_next = {r.name: r.next_scale for r in PROXY_RECIPES.values()
                 if r.next_scale and r.next_scale not in PROXY_RECIPES}  # fmt: skip
assert not _unknown_next, f"next_scale names no recipe: {_unknown_next}"


def get_proxy_recipe(name: str) -> ProxyRecipe:
    try:
        return PROXY_RECIPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown proxy recipe {name!r}; choose one of {sorted(PROXY_RECIPES)}"
        ) from None


@dataclass(frozen=True, kw_only=True)
class DataVariant:
    """The training data of one experiment, as a view over the token pools (see module doc)."""

    weights: dict[str, float] | None = None  # source -> weight; None: natural token shares
    include_groups: tuple[str, ...] = ()  # shard groups added to the admitted ones
    exclude_groups: tuple[str, ...] = ()  # shard groups left out
    filter: dict[str, Any] = field(default_factory=dict)  # FilterConfig field -> value
    boost: dict[str, float] = field(default_factory=dict)  # group -> minimum share of tokens

    def __post_init__(self) -> None:
        check_types(self)
        if self.weights is not None:
            bad = {k: w for k, w in self.weights.items() if not (math.isfinite(w) and w >= 0.0)}
            if bad or not sum(self.weights.values()) > 0:
                raise ConfigError(
                    f"DataVariant.weights must be finite, >= 0 and sum to > 0, got {self.weights}"
                )
        both = set(self.include_groups) & set(self.exclude_groups)
        if both:
            raise ConfigError(f"shard groups {sorted(both)} are both included and excluded")
        bad_boost = {g: s for g, s in self.boost.items() if not 0.0 < s < 1.0}
        if bad_boost:
            raise ConfigError(f"DataVariant.boost shares must be in (0, 1), got {bad_boost}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataVariant:
        data = json_object(data)
        return cls(
            weights=data.get("weights"),
            include_groups=tuple(data.get("include_groups", ())),
            exclude_groups=tuple(data.get("exclude_groups", ())),
            filter=dict(data.get("filter", {})),
            boost=dict(data.get("boost", {})),
        )

    def digest(self) -> str:
        """8 hex characters that name the variant (same settings, same name)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:8]


@dataclass(frozen=True, kw_only=True)
class ExperimentSpec:
    """One ``proxy_runs`` partition: a variant, a proxy recipe and a seed, under a name.

    ``kind`` says who made it (``manual``, ``search``, ``admission``, ``ablation``, ``start``) and
    ``group`` ties the repeats and arms of one comparison together (a search id, a shard group,
    an ablation name)."""

    name: str
    variant: DataVariant
    recipe: str = "proxy_cpu"
    seed: int = 0
    kind: str = "manual"
    group: str = ""
    label: str = ""  # e.g. "with" / "without" for admission, the candidate index for a search
    base: str = ""  # an anneal recipe's: the experiment whose final weights start this one

    def __post_init__(self) -> None:
        check_types(self)
        if not _NAME_RE.match(self.name):
            raise ConfigError(
                f"experiment name {self.name!r}: use lower-case letters, digits, '.', '_', '-' "
                "(it is a Dagster partition key), at most 100 characters"
            )
        recipe = get_proxy_recipe(self.recipe)
        if bool(recipe.starts_from) != bool(self.base):
            raise ConfigError(
                f"experiment {self.name}: recipe {self.recipe} "
                + (f"continues a {recipe.starts_from} proxy: name it as base"
                   if recipe.starts_from else "trains from scratch: it takes no base")
            )  # fmt: skip
        if self.kind not in KINDS:
            raise ConfigError(f"ExperimentSpec.kind={self.kind!r} is not a known kind")
        if self.seed < 0:
            raise ConfigError(f"experiment {self.name}: seed={self.seed}; use a seed >= 0")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "variant": self.variant.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentSpec:
        data = json_object(data)
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ConfigError(f"unknown keys {sorted(unknown)} in an experiment spec")
        return cls(**{**data, "variant": DataVariant.from_dict(data["variant"])})

    def settings(self) -> dict[str, Any]:
        """What determines the result: the variant, the recipe (its name and every setting, so
        that a retuned recipe makes a new identity and old proxies are not reused), the seed and
        an anneal's base (whose own identity the asset chains in); not the name or the
        bookkeeping labels."""
        recipe = dataclasses.asdict(get_proxy_recipe(self.recipe))
        recipe.pop("next_scale")  # what to try next changes nothing this proxy measures
        model = get_recipe(recipe.pop("model"))  # its shape, as identities have always held it
        recipe.update(d_model=model.d_model, n_layers=model.n_layers, n_heads=model.n_heads,
                      n_kv_heads=model.n_kv_heads)  # fmt: skip
        found = {"variant": self.variant.to_dict(), "recipe": self.recipe,
                 "recipe_settings": recipe, "seed": self.seed}  # fmt: skip
        return {**found, "base": self.base} if self.base else found


def experiment_name(prefix: str, variant: DataVariant, seed: int, recipe: str) -> str:
    """``<prefix>-<digest>-s<seed>``, the digest of the variant and the recipe's name: the same
    variant, recipe and seed always get the same name, so registering it twice is one partition
    and it is trained once; the same variant under another recipe (a GPU proxy after a CPU one,
    a larger check run) is another experiment, not a clash with the first."""
    blob = json.dumps({"variant": variant.to_dict(), "recipe": recipe}, sort_keys=True, default=str)
    return f"{prefix}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}-s{seed}"


@dataclass(frozen=True, kw_only=True)
class ExperimentsConfig:
    """How ``proxy_runs`` trains and scores a proxy (the variant itself is in its spec)."""

    max_epochs: float = 4.0  # most passes a proxy makes over one shard group's pool
    in_process: bool = False  # train in the step's own process instead of the proxy launcher
    task_dir: str | None = None  # eval task files: None is the task cache, "" scores no task

    def __post_init__(self) -> None:
        check_types(self)
        if self.max_epochs < 1.0:
            raise ConfigError(f"ExperimentsConfig.max_epochs={self.max_epochs} must be >= 1.0")
