"""The ``train`` job's launch config: a recipe plus any :class:`TrainConfig` field, all optional.

Generated from the library's ``TrainConfig`` (see :mod:`foundation.config`), so every trainer setting
is reachable from the Launchpad and a recipe's values stand unless the operator sets one::

    {"recipe": "llama_7b", "run": {"max_steps": 2000}, "optim": {"lr": 2e-4}}

Sensors read a run's launch back typed (:func:`launch_config`, :class:`Launched`) and build the
resumed run's config from it. Import-light: no assets, no sensors.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import pydantic
from dagster import Config, DagsterRun

from foundation.config import overrides
from foundation.stages import STAGES
from pretrain import storage
from pretrain.train.config import RunConfig, TrainConfig
from pretrain.train.recipes import DEFAULT_RECIPE, TRAIN_RECIPES, recipe_with_overrides
from resources.storage import ArtifactStore

TRAIN_OP = "train_model"

# Every TrainConfig field, optional: a recipe's value stands unless the operator sets one.
# The artifact locations come from the ArtifactStore, not from the Launchpad.
if TYPE_CHECKING:  # classes generated from library dataclasses (foundation.config): Any to mypy
    TrainOverrides = Any
    TrainRunConfig = Any
else:
    TrainOverrides = STAGES["train"].config_class
    TrainRunConfig = pydantic.create_model(
        "TrainRunConfig",
        __base__=TrainOverrides,
        recipe=(
            str,
            pydantic.Field(DEFAULT_RECIPE, description=f"one of {sorted(TRAIN_RECIPES)}"),
        ),
    )
TrainRunConfig.__doc__ = (
    "What an operator sets at launch: a recipe, and any TrainConfig field to override in it "
    "(sections run / optim / data / checkpoint / metrics / compute / model)."
)


def resolve_train_config(config: TrainRunConfig, store: ArtifactStore) -> TrainConfig:
    """Operator settings + artifact locations → the trainer's full, validated config."""
    return recipe_with_overrides(
        config.recipe,
        packed_dir=store.uri("packed_tokens"),
        # checkpoints commit to s3:// directly (staged locally, the commit record last)
        run_root=store.uri("runs") if storage.is_s3(store.root) else store.local_dir("runs"),
        overrides={k: v for k, v in overrides(config).items() if k != "recipe"},
    )


# the library's defaults of the run fields recovery reads and changes (RunConfig's own)
_RUN_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunConfig)}


class Launched(NamedTuple):
    """The run settings a ``train`` launch trained with: the operator's, else the library's."""

    branch: str
    resume: str
    lr_scale: float
    skip_windows: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, config: Config) -> Launched:
        run = overrides(config).get("run", {})
        values = {name: run.get(name, _RUN_DEFAULTS[name]) for name in cls._fields}
        values["skip_windows"] = tuple((int(a), int(b)) for a, b in values["skip_windows"])
        return cls(**values)


def launch_config(run: DagsterRun) -> Config:
    """The run's ``train_model`` op config, typed (the job's :class:`TrainRunConfig`)."""
    # Dagster types run_config's values as object; "ops" is the op-name → op-config mapping
    ops = cast(dict[str, Any], (run.run_config or {}).get("ops", {}))
    return TrainRunConfig(**ops.get(TRAIN_OP, {}).get("config", {}))
