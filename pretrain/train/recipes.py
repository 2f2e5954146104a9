"""Named training recipes: one table row per recipe, one builder that turns a row and (packed
data, output dir, steps) into a TrainConfig.

    from pretrain.train.recipes import get_train_recipe
    cfg = get_train_recipe("debug_tiny")(packed_dir="artifacts/packed_tokens", out_dir="runs",
                                         max_steps=50)

The model's vocab size and context come from the packed data's ``index.json``; everything else
is a documented default for that scale (:data:`TRAIN_RECIPES`). ``python -m pretrain.train
--recipe NAME --packed DIR --out DIR`` calls these. The global batch of the Llama-scale recipes
is given in tokens (the reference table: 125M ~0.5M, 1.3B ~1M, 7B and 70B ~4M tokens per step)
and turned into whole sequences of the packed context (see :func:`sequences_for_tokens`);
``debug_tiny`` uses 16 sequences whatever the context.

    cfg = recipe_with_overrides("debug_tiny", packed_dir=..., run_root=...,
                                overrides={"run": {"max_steps": 200}, "optim": {"schedule": "wsd"}})

A new recipe is a new row: a model recipe name (:mod:`pretrain.model.recipes`) and the values
below; ``tests/unit/train/test_train_recipes.py`` pins every row's resulting config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pretrain.errors import ConfigError
from pretrain.model import recipes as model_recipes
from pretrain.packing.format import packed_shape
from pretrain.train.config import TrainConfig, build_section, train_config


@dataclass(frozen=True, kw_only=True)
class TrainRecipe:
    """What differs between recipes; call it to build the TrainConfig for packed data.

    The batch is ``global_batch_sequences`` or ``global_batch_tokens`` (exactly one);
    ``checkpoint_every_steps=None`` checkpoints four times per run (a quarter of
    ``max_steps``). Warmup is clipped to the run's ``max_steps``."""

    model: str  # a pretrain.model.recipes name
    max_steps: int  # the default horizon (also the LR schedule's)
    lr: float
    micro_batch_size: int
    warmup_steps: int
    checkpoint_every_steps: int | None
    global_batch_sequences: int | None = None
    global_batch_tokens: int | None = None
    deterministic: bool = False

    def __post_init__(self) -> None:
        if (self.global_batch_sequences is None) == (self.global_batch_tokens is None):
            raise ConfigError(
                f"training recipe for {self.model!r}: give the global batch either in sequences "
                "(global_batch_sequences) or in tokens (global_batch_tokens), exactly one"
            )

    def __call__(
        self,
        *,
        packed_dir: str,
        out_dir: str,
        max_steps: int | None = None,
        branch: str = "b00",
        wandb_mode: str = "offline",
    ) -> TrainConfig:
        max_steps = self.max_steps if max_steps is None else max_steps
        index = packed_shape(packed_dir)  # index.json only: no copy of s3:// shards here
        model = model_recipes.get_recipe(self.model)(
            vocab_size=index.vocab_size, max_seq_len=index.seq_len
        )
        sequences = self.global_batch_sequences
        if sequences is None:
            tokens = self.global_batch_tokens or 0  # set: checked in __post_init__
            sequences = sequences_for_tokens(tokens, index.seq_len - 1, self.micro_batch_size)
        every = self.checkpoint_every_steps
        if every is None:
            every = max(1, max_steps // 4)
        return train_config(
            model,
            packed_dir=packed_dir,
            run_root=out_dir,
            max_steps=max_steps,
            lr=self.lr,
            warmup_steps=min(self.warmup_steps, max_steps),
            micro_batch_size=self.micro_batch_size,
            global_batch_sequences=sequences,
            every_steps=every,
            wandb_mode=wandb_mode,
            deterministic=self.deterministic,
            checkpoint={"keep_last": 3},
            run={"branch": branch},
        )


def rederive_global_batch(global_batch_sequences: int, micro_batch_size: int) -> int:
    """The multiple of a new ``micro_batch_size`` closest to a recipe's global batch (at least
    one micro-batch): 2050 sequences at micro-batch 4 -> 2048, 16 at 3 -> 15."""
    return max(1, round(global_batch_sequences / micro_batch_size)) * micro_batch_size


def sequences_for_tokens(num_tokens: int, tokens_per_sequence: int, multiple_of: int) -> int:
    """Whole sequences closest to ``num_tokens`` per step, a multiple of ``multiple_of`` (the
    micro-batch) and at least one micro-batch: 1M tokens at context 2048 -> 512 sequences."""
    micro_batches = max(1, round(num_tokens / (tokens_per_sequence * multiple_of)))
    return micro_batches * multiple_of


TRAIN_RECIPES: dict[str, TrainRecipe] = {
    # ~1M parameters, 16 sequences per step; seconds per 10 steps on 2 CPU cores
    "debug_tiny": TrainRecipe(
        model="debug_tiny", max_steps=200, lr=3e-3, micro_batch_size=8,
        global_batch_sequences=16, warmup_steps=10, checkpoint_every_steps=None,
        deterministic=True,
    ),
    "llama_125m": TrainRecipe(
        model="llama_125m", max_steps=20_000, lr=6e-4, micro_batch_size=16,
        global_batch_tokens=524_288, warmup_steps=700, checkpoint_every_steps=1000,
    ),
    "llama_1b": TrainRecipe(
        model="llama_1b", max_steps=100_000, lr=2e-4, micro_batch_size=8,
        global_batch_tokens=1_048_576, warmup_steps=2000, checkpoint_every_steps=1000,
    ),
    "llama_7b": TrainRecipe(
        model="llama_7b", max_steps=250_000, lr=3e-4, micro_batch_size=2,
        global_batch_tokens=4_194_304, warmup_steps=2000, checkpoint_every_steps=1000,
    ),
    "llama_70b": TrainRecipe(
        model="llama_70b", max_steps=500_000, lr=1.5e-4, micro_batch_size=1,
        global_batch_tokens=4_194_304, warmup_steps=2000, checkpoint_every_steps=500,
    ),
}  # fmt: skip


def get_train_recipe(name: str) -> TrainRecipe:
    try:
        return TRAIN_RECIPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown training recipe {name!r}; choose one of {sorted(TRAIN_RECIPES)}"
        ) from None


DEFAULT_RECIPE = "debug_tiny"


def recipe_with_overrides(
    recipe: str, *, packed_dir: str, run_root: str, overrides: dict[str, Any] | None = None
) -> TrainConfig:
    """The named recipe with an operator's settings applied; every value not in ``overrides``
    is the recipe's own.

    ``overrides`` mirrors :class:`TrainConfig` (sections as dicts, only the fields set), e.g.
    ``{"run": {"max_steps": 600, "branch": "b01"}, "optim": {"lr": 1e-3}, "seed": 3}``. The
    recipe is built for the planned horizon: ``optim.schedule_steps``, else ``run.max_steps``,
    else the recipe's default; its warmup is clipped to that horizon unless set. A
    ``data.micro_batch_size`` set without ``data.global_batch_sequences`` keeps the recipe's
    global batch as nearly as a multiple of the new micro-batch allows. The Dagster
    training op calls this with the Launchpad's config. Reads the packed index (vocab size,
    context length)."""
    overrides = dict(overrides or {})
    run_set = overrides.get("run", {})
    optim_set = overrides.get("optim", {})
    horizon = optim_set.get("schedule_steps") or run_set.get("max_steps")
    cfg = get_train_recipe(recipe)(
        packed_dir=packed_dir,
        out_dir=run_root,
        **({"max_steps": horizon} if horizon else {}),
    )
    data_set = overrides.get("data")
    if isinstance(data_set, dict) and "global_batch_sequences" not in data_set:
        micro = data_set.get("micro_batch_size")
        if isinstance(micro, int) and not isinstance(micro, bool) and micro > 0:
            # the recipe's global batch was derived for its own micro-batch: derive it again
            batch = rederive_global_batch(cfg.data.global_batch_sequences, micro)
            overrides["data"] = {**data_set, "global_batch_sequences": batch}
    sections: dict[str, Any] = {}
    for name, values in overrides.items():
        if name not in {f.name for f in dataclasses.fields(TrainConfig)}:
            raise ConfigError(f"unknown training setting {name!r}; known: {_SECTIONS}")
        current = getattr(cfg, name)
        if dataclasses.is_dataclass(current) and not isinstance(current, type):  # a section
            if not isinstance(values, dict):
                raise ConfigError(f"training setting {name!r} must be a mapping of its fields")
            merged = {**dataclasses.asdict(current), **values}
            sections[name] = build_section(type(current), merged, name)
        else:
            sections[name] = values
    optim = sections.get("optim", cfg.optim)
    if "warmup_steps" not in optim_set and optim.warmup_steps > optim.schedule_steps:
        sections["optim"] = dataclasses.replace(optim, warmup_steps=optim.schedule_steps)
    return cfg.replace(**sections)


_SECTIONS = [f.name for f in dataclasses.fields(TrainConfig)]
