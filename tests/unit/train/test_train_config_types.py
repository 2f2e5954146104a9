"""Strict types in the trainer's JSON config (issue 19 item 13): a string never becomes a bool or
a number, ``null`` only fills optional fields, and every message names the field.

    .venv/bin/pytest -q tests/unit/train/test_train_config_types.py
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pretrain.errors import ConfigError
from pretrain.model.config import ModelConfig
from pretrain.train.config import (
    CheckpointConfig,
    DataConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)


def base() -> dict[str, Any]:
    cfg = TrainConfig(
        model=ModelConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=2, n_kv_heads=2),
        optim=OptimConfig(schedule_steps=20, warmup_steps=2),
        data=DataConfig(packed_dir="packed", micro_batch_size=2, global_batch_sequences=4),
        checkpoint=CheckpointConfig(run_root="runs"),
        run=RunConfig(max_steps=10, skip_windows=((3, 5),)),
    )
    return json.loads(cfg.to_json())


def with_value(section: str | None, key: str, value: Any) -> dict[str, Any]:
    data = base()
    (data[section] if section else data)[key] = value
    return data


def test_json_round_trip_still_builds_the_same_config() -> None:
    data = base()
    cfg = TrainConfig.from_dict(data)
    assert cfg.run.skip_windows == ((3, 5),) and cfg.optim.betas == (0.9, 0.95)
    assert TrainConfig.from_json(cfg.to_json()) == cfg
    # an int where a float is expected is fine JSON ("lr": 1) and becomes a float
    assert TrainConfig.from_dict(with_value("optim", "lr", 1)).optim.lr == 1.0
    assert isinstance(TrainConfig.from_dict(with_value("optim", "lr", 1)).optim.lr, float)


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("compute", "compile", "false", "config.compute.compile must be a boolean (true/false), got str 'false'"),
        (None, "deterministic", "false", "config.deterministic must be a boolean (true/false), got str 'false'"),
        ("checkpoint", "async_save", "no", "config.checkpoint.async_save must be a boolean (true/false), got str 'no'"),
        ("checkpoint", "async_save", 1, "config.checkpoint.async_save must be a boolean (true/false), got int 1"),
        ("run", "max_steps", "200", "config.run.max_steps must be an integer, got str '200'"),
        ("run", "max_steps", 2.5, "config.run.max_steps must be an integer, got float 2.5"),
        ("run", "max_steps", True, "config.run.max_steps must be an integer, got bool True"),
        (None, "seed", None, "config.seed must not be null"),
        ("optim", "lr", "3e-4", "config.optim.lr must be a number, got str '3e-4'"),
        ("optim", "betas", [0.9], "config.optim.betas must be a list of 2 values, got list \\[0.9\\]"),
        ("optim", "betas", 0.9, "config.optim.betas must be a tuple (a list in JSON), got float 0.9"),
        ("run", "skip_windows", [[3, "5"]], r"config.run.skip_windows\[0\]\[1\] must be an integer"),
        ("run", "branch", 7, "config.run.branch must be a string, got int 7"),
        ("model", "vocab_size", "64", "config.model.vocab_size must be an integer, got str '64'"),
        ("model", "qk_norm", "true", "config.model.qk_norm must be a boolean"),
        ("metrics", "val_every_steps", None, "config.metrics.val_every_steps must not be null"),
        ("data", "packed_dir", None, "config.data.packed_dir must not be null"),
        (None, "run", [], "config.run must be a JSON object, got list"),
    ],
)  # fmt: skip
def test_wrong_types_are_refused_with_the_field_named(
    section: str | None, key: str, value: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TrainConfig.from_dict(with_value(section, key, value))


def test_null_fills_only_optional_fields() -> None:
    cfg = TrainConfig.from_dict(with_value("run", "inject_nan_at_step", None))
    assert cfg.run.inject_nan_at_step is None
    cfg = TrainConfig.from_dict(with_value("metrics", "peak_flops_per_device", 1e12))
    assert cfg.metrics.peak_flops_per_device == 1e12
    with pytest.raises(ConfigError, match="metrics.peak_flops_per_device must be a number"):
        TrainConfig.from_dict(with_value("metrics", "peak_flops_per_device", "1e12"))
