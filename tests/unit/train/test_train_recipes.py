"""Every training recipe builds exactly the TrainConfig it built before the recipes became one
table (``pretrain/train/recipes.py``).

``tests/golden/train_recipes.json`` holds each recipe's ``to_dict()`` (as JSON) for two packed
shapes (context 33 / vocab 64 and context 2049 / vocab 50304), once with the recipe's defaults
and once with ``max_steps=3`` (warmup clipped, checkpoint interval of the short run), branch
``b07`` and W&B disabled. It was captured from the five recipe functions of commit 7edb8fb,
before the table replaced them; a change to a recipe or to a TrainConfig default shows here as
the exact fields that moved.

    pytest -q tests/unit/train/test_train_recipes.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pretrain.errors import ConfigError
from pretrain.packing.format import FORMAT
from pretrain.train.recipes import TRAIN_RECIPES, TrainRecipe, get_train_recipe

GOLDEN = Path(__file__).resolve().parents[3] / "tests" / "golden" / "train_recipes.json"
SHAPES = {"packed-s33-v64": (33, 64), "packed-s2049-v50304": (2049, 50304)}


@pytest.fixture
def packed_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Committed packed folders holding only ``index.json`` (all a recipe reads), named
    relative to the working folder so the configs hold the same paths as the golden file."""
    monkeypatch.chdir(tmp_path)
    for name, (seq_len, vocab) in SHAPES.items():
        Path(name).mkdir()
        index = {"format": FORMAT, "seq_len": seq_len, "vocab_size": vocab}
        Path(name, "index.json").write_text(json.dumps(index))
        Path(name, "_COMMITTED").write_text("{}")


def built(recipe: str, packed: str, case: str) -> dict:
    build = get_train_recipe(recipe)
    if case == "defaults":
        cfg = build(packed_dir=packed, out_dir="runs")
    else:
        cfg = build(
            packed_dir=packed, out_dir="runs", max_steps=3, branch="b07", wandb_mode="disabled"
        )
    return json.loads(cfg.to_json())


def changed_fields(expected: dict, actual: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(expected) | set(actual))
    out = []
    for key in keys:
        a, b = expected.get(key), actual.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += changed_fields(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def test_the_golden_file_covers_every_recipe() -> None:
    golden = json.loads(GOLDEN.read_text())
    assert {key.split("/")[0] for key in golden} == set(TRAIN_RECIPES)
    assert len(golden) == len(TRAIN_RECIPES) * len(SHAPES) * 2


@pytest.mark.parametrize("key", sorted(json.loads(GOLDEN.read_text())))
def test_recipe_config_is_unchanged(key: str, packed_dirs: None) -> None:
    expected = json.loads(GOLDEN.read_text())[key]
    actual = built(*key.split("/"))
    assert changed_fields(expected, actual) == [], key


def test_a_changed_field_is_named() -> None:
    """The comparison itself: a moved value is reported with its dotted path."""
    expected = {"optim": {"lr": 3e-3, "warmup_steps": 10}, "seed": 0}
    actual = {"optim": {"lr": 3e-3, "warmup_steps": 3}, "seed": 0}
    assert changed_fields(expected, actual) == ["optim.warmup_steps: 10 -> 3"]


def test_llama_batch_in_tokens_becomes_whole_micro_batches(packed_dirs: None) -> None:
    cfg = get_train_recipe("llama_7b")(packed_dir="packed-s2049-v50304", out_dir="runs")
    # 4,194,304 tokens / (2048 tokens per sequence * 2 per micro-batch) = 1024 micro-batches
    assert cfg.data.global_batch_sequences == 2048
    assert cfg.checkpoint.every_steps == 1000 and cfg.optim.warmup_steps == 2000


def test_a_row_gives_its_batch_one_way() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        TrainRecipe(model="debug_tiny", max_steps=10, lr=1e-3, micro_batch_size=2,
                    warmup_steps=1, checkpoint_every_steps=None)  # fmt: skip
    with pytest.raises(ConfigError, match="exactly one"):
        TrainRecipe(model="debug_tiny", max_steps=10, lr=1e-3, micro_batch_size=2,
                    warmup_steps=1, checkpoint_every_steps=None,
                    global_batch_sequences=4, global_batch_tokens=4096)  # fmt: skip


def test_unknown_recipe_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="debug_tiny"):
        get_train_recipe("llama_3b")
