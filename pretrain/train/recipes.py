"""Named training recipes: functions that turn (packed data, output dir, steps) into a TrainConfig.

    from pretrain.train.recipes import debug_tiny
    cfg = debug_tiny(packed_dir="artifacts/packed_tokens", out_dir="runs", max_steps=50)

The model's vocab size and context come from the packed data's ``index.json``; everything else
is a documented default for that scale. ``python -m pretrain.train --recipe NAME --packed DIR
--out DIR`` calls these. The global batch of the Llama-scale recipes is given in tokens (the
reference table: 125M ~0.5M, 1.3B ~1M, 7B and 70B ~4M tokens per step) and turned into whole
sequences of the packed context (see :func:`sequences_for_tokens`); ``debug_tiny`` uses 16
sequences whatever the context.

    cfg = recipe_with_overrides("debug_tiny", packed_dir=..., run_root=...,
                                overrides={"run": {"max_steps": 200}, "optim": {"schedule": "wsd"}})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pretrain.errors import ConfigError
from pretrain.model import recipes as model_recipes
from pretrain.packing.format import packed_shape
from pretrain.train.config import (
    CheckpointConfig,
    DataConfig,
    MetricsConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    build_section,
)


def _recipe(
    model_name: str,
    *,
    packed_dir: str,
    out_dir: str,
    max_steps: int,
    lr: float,
    micro_batch_size: int,
    global_batch_sequences: int | None = None,
    global_batch_tokens: int | None = None,
    warmup_steps: int,
    every_steps: int,
    branch: str,
    deterministic: bool,
    wandb_mode: str,
) -> TrainConfig:
    index = packed_shape(packed_dir)  # index.json only: no copy of s3:// shards here
    model = model_recipes.get_recipe(model_name)(
        vocab_size=index.vocab_size, max_seq_len=index.seq_len
    )
    if global_batch_sequences is None:
        assert global_batch_tokens is not None, "a recipe gives its batch in tokens or sequences"
        global_batch_sequences = sequences_for_tokens(
            global_batch_tokens, index.seq_len - 1, micro_batch_size
        )
    return TrainConfig(
        model=model,
        optim=OptimConfig(
            lr=lr, warmup_steps=min(warmup_steps, max_steps), schedule_steps=max_steps
        ),
        data=DataConfig(
            packed_dir=packed_dir,
            micro_batch_size=micro_batch_size,
            global_batch_sequences=global_batch_sequences,
        ),
        checkpoint=CheckpointConfig(run_root=out_dir, every_steps=every_steps, keep_last=3),
        run=RunConfig(branch=branch, max_steps=max_steps),
        metrics=MetricsConfig(wandb_mode=wandb_mode),
        deterministic=deterministic,
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


def debug_tiny(
    *,
    packed_dir: str,
    out_dir: str,
    max_steps: int = 200,
    branch: str = "b00",
    wandb_mode: str = "offline",
) -> TrainConfig:
    """~1M-parameter model, 16 sequences per step; seconds per 10 steps on 2 CPU cores."""
    return _recipe(
        "debug_tiny",
        packed_dir=packed_dir,
        out_dir=out_dir,
        max_steps=max_steps,
        lr=3e-3,
        micro_batch_size=8,
        global_batch_sequences=16,
        warmup_steps=10,
        every_steps=max(1, max_steps // 4),
        branch=branch,
        deterministic=True,
        wandb_mode=wandb_mode,
    )


def llama_125m(
    *,
    packed_dir: str,
    out_dir: str,
    max_steps: int = 20_000,
    branch: str = "b00",
    wandb_mode: str = "offline",
) -> TrainConfig:
    return _recipe(
        "llama_125m",
        packed_dir=packed_dir,
        out_dir=out_dir,
        max_steps=max_steps,
        lr=6e-4,
        micro_batch_size=16,
        global_batch_tokens=524_288,
        warmup_steps=700,
        every_steps=1000,
        branch=branch,
        deterministic=False,
        wandb_mode=wandb_mode,
    )


def llama_1b(
    *,
    packed_dir: str,
    out_dir: str,
    max_steps: int = 100_000,
    branch: str = "b00",
    wandb_mode: str = "offline",
) -> TrainConfig:
    return _recipe(
        "llama_1b",
        packed_dir=packed_dir,
        out_dir=out_dir,
        max_steps=max_steps,
        lr=2e-4,
        micro_batch_size=8,
        global_batch_tokens=1_048_576,
        warmup_steps=2000,
        every_steps=1000,
        branch=branch,
        deterministic=False,
        wandb_mode=wandb_mode,
    )


def llama_7b(
    *,
    packed_dir: str,
    out_dir: str,
    max_steps: int = 250_000,
    branch: str = "b00",
    wandb_mode: str = "offline",
) -> TrainConfig:
    return _recipe(
        "llama_7b",
        packed_dir=packed_dir,
        out_dir=out_dir,
        max_steps=max_steps,
        lr=3e-4,
        micro_batch_size=2,
        global_batch_tokens=4_194_304,
        warmup_steps=2000,
        every_steps=1000,
        branch=branch,
        deterministic=False,
        wandb_mode=wandb_mode,
    )


def llama_70b(
    *,
    packed_dir: str,
    out_dir: str,
    max_steps: int = 500_000,
    branch: str = "b00",
    wandb_mode: str = "offline",
) -> TrainConfig:
    return _recipe(
        "llama_70b",
        packed_dir=packed_dir,
        out_dir=out_dir,
        max_steps=max_steps,
        lr=1.5e-4,
        micro_batch_size=1,
        global_batch_tokens=4_194_304,
        warmup_steps=2000,
        every_steps=500,
        branch=branch,
        deterministic=False,
        wandb_mode=wandb_mode,
    )


TRAIN_RECIPES: dict[str, Callable[..., TrainConfig]] = {
    "debug_tiny": debug_tiny,
    "llama_125m": llama_125m,
    "llama_1b": llama_1b,
    "llama_7b": llama_7b,
    "llama_70b": llama_70b,
}


def get_train_recipe(name: str) -> Callable[..., TrainConfig]:
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
        if dataclasses.is_dataclass(current):
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
