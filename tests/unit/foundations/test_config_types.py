"""Every library config dataclass refuses a wrong-typed value, naming the field (issue 26, §3).

The check is one function, :func:`pretrain.settings.check_types`, that every config dataclass
calls first in ``__post_init__``. This walks every config class the stage registry
(``foundation/stages.py``) reaches, nested sections included, and gives each field in turn a value of
the wrong type: the string ``"false"`` for a boolean (truthy in Python), ``"3"`` for a number, a
bare string for a tuple, a number for a string. Run::

    .venv/bin/pytest -q tests/unit/foundations/test_config_types.py
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from foundation.stages import STAGES
from pretrain import storage
from pretrain.dedup.config import DedupConfig, LineDedupConfig
from pretrain.errors import ConfigError
from pretrain.filters.config import FilterConfig
from pretrain.packing.format import FORMAT
from pretrain.train.recipes import recipe_with_overrides


def reached(cls: type, found: dict[type, None] | None = None) -> dict[type, None]:
    """``cls`` and every config dataclass its fields hold (tuples, mappings, optionals)."""
    found = {} if found is None else found
    if cls in found:
        return found
    found[cls] = None
    for hint in typing.get_type_hints(cls).values():
        stack = [hint]
        while stack:
            inner = stack.pop()
            if dataclasses.is_dataclass(inner) and isinstance(inner, type):
                reached(inner, found)
            stack.extend(typing.get_args(inner))
    return found


def _train_config(tmp_path: Path) -> Any:
    """A real TrainConfig (the debug recipe on a packed index): its sections need values."""
    packed = tmp_path / "packed"
    packed.mkdir(exist_ok=True)
    index = {"format": FORMAT, "seq_len": 65, "vocab_size": 512}
    (packed / "index.json").write_text(json.dumps(index))
    storage.commit_marker(str(packed))
    return recipe_with_overrides(
        "debug_tiny", packed_dir=str(packed), run_root=str(tmp_path / "runs"),
        overrides={"run": {"max_steps": 8}},
    )  # fmt: skip


def wrong_value(hint: Any) -> Any | None:
    """A value of the wrong type for ``hint`` (None: no such value is meaningful here)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return wrong_value(inner[0]) if len(inner) == 1 else None
    if hint is bool:
        return "false"
    if hint in (int, float):
        return "3"
    if hint is str:
        return 5
    if origin is tuple:
        return "en"
    if origin is dict:
        return ["not", "a", "mapping"]
    if dataclasses.is_dataclass(hint):
        return {"a": "mapping, not the section"}
    if origin is typing.Literal:
        return object()
    return None


# the values of the few classes that have required fields (and are not training sections)
REQUIRED = {
    "CurriculumStage": {"name": "anneal", "fraction": 0.5},
    "TaskSpec": {"kind": "hellaswag", "path": "hellaswag.jsonl.gz"},
    "AdmissionReview": {"decision": "reject", "reviewer": "ana", "reason": "spam"},
    "TargetSet": {"name": "clean_news", "uris": ("news.jsonl.gz",)},
}


def all_configs(tmp_path: Path) -> list[Any]:
    """One valid instance of every config class the stages reach (defaults, or the recipe's)."""
    classes = {}
    for stage in STAGES.values():
        reached(stage.library, classes)
    train = _train_config(tmp_path)
    sections = {
        type(getattr(train, f.name)): getattr(train, f.name) for f in dataclasses.fields(train)
    }
    instances = []
    for cls in classes:
        if cls is type(train):
            instances.append(train)
        elif cls in sections:
            instances.append(sections[cls])
        else:
            instances.append(cls(**REQUIRED.get(cls.__name__, {})))
    return instances


def test_every_registered_config_refuses_a_wrong_typed_value_naming_the_field(
    tmp_path: Path,
) -> None:
    configs = all_configs(tmp_path)
    assert len(configs) >= 35  # every stage's config and the sections they hold
    checked = []
    for config in configs:
        cls = type(config)
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            bad = wrong_value(hints[field.name])
            if bad is None:
                continue
            with pytest.raises(ConfigError) as caught:
                dataclasses.replace(config, **{field.name: bad})
            message = str(caught.value)
            assert f"{cls.__name__}.{field.name}" in message, message
            checked.append(f"{cls.__name__}.{field.name}")
    assert len(checked) > 300 and "DedupConfig.url_dedup" in checked


def test_the_messages_say_what_was_wanted_and_what_came() -> None:
    with pytest.raises(ConfigError) as caught:
        DedupConfig(url_dedup="false")
    assert str(caught.value) == (
        "DedupConfig.url_dedup must be a boolean (true/false), got str 'false'"
    )
    with pytest.raises(
        ConfigError, match=r"FilterConfig.code_sources must be a tuple \(a list in JSON\), got str"
    ):
        FilterConfig(code_sources="code")
    with pytest.raises(ConfigError, match=r"DedupConfig.threshold must be a number, got bool"):
        DedupConfig(threshold=True)
    with pytest.raises(ConfigError, match=r"LineDedupConfig.skip_sources\[1\] must be a string"):
        DedupConfig(lines=dataclasses.replace(DedupConfig().lines, skip_sources=("code", 3)))
    # a list where a tuple is declared is taken (and stored as a tuple: configs stay hashable)
    lines = LineDedupConfig(skip_sources=["code", "math"])
    assert lines.skip_sources == ("code", "math")
    assert hash(lines) == hash(LineDedupConfig(skip_sources=("code", "math")))
