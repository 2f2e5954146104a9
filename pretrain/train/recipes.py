"""Named training recipes: functions that turn (packed data, output dir, steps) into a TrainConfig.

    from pretrain.train.recipes import debug_tiny
    cfg = debug_tiny(packed_dir="artifacts/packed_tokens", out_dir="runs", max_steps=50)

The model's vocab size and context come from the packed data's ``index.json``; everything else
is a documented default for that scale. ``python -m pretrain.train --recipe NAME --packed DIR
--out DIR`` calls these.
"""

from __future__ import annotations

from collections.abc import Callable

from pretrain.errors import ConfigError
from pretrain.model import recipes as model_recipes
from pretrain.train.config import (
    CheckpointConfig,
    DataConfig,
    MetricsConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from pretrain.train.data import read_packed_index


def _recipe(
    model_name: str,
    *,
    packed_dir: str,
    out_dir: str,
    max_steps: int,
    lr: float,
    micro_batch_size: int,
    global_batch_sequences: int,
    warmup_steps: int,
    every_steps: int,
    branch: str,
    deterministic: bool,
    wandb_mode: str,
) -> TrainConfig:
    index = read_packed_index(packed_dir)
    model = model_recipes.get_recipe(model_name)(
        vocab_size=index.vocab_size, max_seq_len=index.seq_len
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
        global_batch_sequences=256,
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
        lr=4e-4,
        micro_batch_size=8,
        global_batch_sequences=512,
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
        global_batch_sequences=1024,
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
        global_batch_sequences=1024,
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
