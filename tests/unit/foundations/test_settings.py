"""Every setting is defined once, in the library's config dataclasses (issue 17).

The Launchpad's config classes are generated from them (``foundation/config.py``): these tests check
that a recipe launched from Dagster trains with the recipe's own values, that Dagster's defaults
are the library's for every stage, and that no Dagster module declares a ``Config`` by hand.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
from pathlib import Path

import pytest
from dagster import validate_run_config

from app.definitions import build_definitions
from foundation.config import to_library
from foundation.stages import STAGES, add_stage_options, run_configs, stage_settings
from foundation.train_config import TrainRunConfig, resolve_train_config
from pretrain.train.config import TrainConfig
from pretrain.train.recipes import TRAIN_RECIPES
from resources.storage import ArtifactStore
from tests.helpers.training import make_packed

ROOT = Path(__file__).resolve().parents[3]


def launch(recipe: str, **settings: dict) -> TrainRunConfig:
    """The ``train_model`` config exactly as Dagster hands it to the op from a Launchpad launch."""
    defs = build_definitions(artifact_root="/tmp/unused")
    run_config = {"ops": {"train_model": {"config": {"recipe": recipe, **settings}}}}
    processed = validate_run_config(defs.resolve_job_def("train"), run_config)
    return TrainRunConfig(**processed["ops"]["train_model"]["config"])


@pytest.mark.parametrize("recipe", sorted(TRAIN_RECIPES))
def test_a_recipe_launched_from_dagster_trains_with_the_recipes_values(
    recipe: str, tmp_path: Path
) -> None:
    store = ArtifactStore(root=str(tmp_path))
    make_packed(tmp_path / "packed_tokens")
    effective = resolve_train_config(launch(recipe), store)
    expected = TRAIN_RECIPES[recipe](
        packed_dir=store.uri("packed_tokens"), out_dir=store.local_dir("runs")
    )
    assert effective == expected
    # run.max_steps sets the recipe's horizon: the recipe planned for 50 steps, nothing else
    shorter = resolve_train_config(launch(recipe, run={"max_steps": 50}), store)
    planned = TRAIN_RECIPES[recipe](
        packed_dir=store.uri("packed_tokens"), out_dir=store.local_dir("runs"), max_steps=50
    )
    assert shorter == planned and shorter.data == expected.data
    # an explicit override changes that field alone
    tuned = resolve_train_config(launch(recipe, optim={"lr": 1e-5}), store)
    assert tuned == expected.replace(optim=dataclasses.replace(expected.optim, lr=1e-5))


def test_llama_7b_keeps_its_batch_and_checkpoint_interval(tmp_path: Path) -> None:
    """The bug of issue 17: Launchpad defaults replaced the recipe's batch and interval."""
    store = ArtifactStore(root=str(tmp_path))
    make_packed(tmp_path / "packed_tokens")
    cfg = resolve_train_config(launch("llama_7b", run={"max_steps": 10}), store)
    assert cfg.data.micro_batch_size == 2 and cfg.data.global_batch_sequences > 16
    assert cfg.checkpoint.every_steps == 1000


DATA_STAGES = sorted(name for name, stage in STAGES.items() if not stage.optional)
# what the assets fill in themselves (artifact locations), per stage
GIVEN = {"filter": {"quality_model_uri": None}}


def cli(*argv: str) -> dict:
    parser = argparse.ArgumentParser()
    add_stage_options(parser)
    return stage_settings(parser.parse_args(list(argv)))


def argv_of_defaults(name: str) -> list[str]:
    """Every ``--<stage>.<path>`` leaf option with its library default, as argv."""
    stage = STAGES[name]
    default = dataclasses.asdict(stage.library(**GIVEN.get(name, {})))
    parser = argparse.ArgumentParser()
    add_stage_options(parser, (name,))
    argv = []
    for action in parser._actions:
        if not action.option_strings[0].startswith(f"--{name}.") or action.metavar == "null":
            continue
        option = action.option_strings[0]
        value = default
        for part in option.removeprefix(f"--{name}.").split("."):
            value = value[part] if value is not None else None  # an unset optional section
        if value is None and option.count(".") > 1:
            continue  # a leaf of a section that is off by default has no default to give
        if isinstance(value, bool):
            text = str(value).lower()
        elif value is None:
            text = "null"
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(value)
        argv += [option, text]
    return argv


@pytest.mark.parametrize("name", DATA_STAGES)
def test_dagster_cli_and_library_defaults_agree(name: str, tmp_path: Path) -> None:
    stage, given = STAGES[name], GIVEN.get(name, {})
    defs = build_definitions(artifact_root=str(tmp_path))
    library_default = stage.library(**given)
    for job, op in stage.targets:
        processed = validate_run_config(defs.resolve_job_def(job), {})
        from_dagster = stage.config_class(**processed["ops"][op]["config"])
        assert to_library(from_dagster, stage.library, **given) == library_default, (job, op)
    assert cli() == {}  # no option given: the command line sets nothing
    # every leaf option given its library default round-trips to the library default
    settings = cli(*argv_of_defaults(name))[name]
    job, op = stage.targets[0]
    processed = validate_run_config(defs.resolve_job_def(job), run_configs({name: settings})[job])
    from_cli = stage.config_class(**processed["ops"][op]["config"])
    assert to_library(from_cli, stage.library, **given) == library_default


def test_cli_options_reach_the_run_config(tmp_path: Path) -> None:
    settings = cli(
        "--filter.langid.min_score", "0.5", "--filter.urls", "null",
        "--dedup.threshold", "0.7", "--train.run.max_steps", "30",
    )  # fmt: skip
    configs = run_configs(settings)
    assert configs["filtered_shards_job"]["ops"]["filtered_shards"]["config"] == {
        "langid": {"min_score": 0.5}, "urls": None
    }  # fmt: skip
    assert configs["dedup_clusters_job"]["ops"]["dedup_clusters"]["config"] == {"threshold": 0.7}
    assert configs["minhash_signatures_job"]["ops"]["minhash_signatures"]["config"] == {
        "threshold": 0.7
    }
    defs = build_definitions(artifact_root=str(tmp_path))
    for job, run_config in configs.items():
        assert validate_run_config(defs.resolve_job_def(job), run_config)
    with pytest.raises(SystemExit):
        cli("--filter.repair_mojibake", "yes")  # booleans are true/false, nothing else


def test_every_library_field_is_reachable_from_the_launchpad(tmp_path: Path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    for stage in STAGES.values():
        for job, op in stage.targets:
            schema = defs.resolve_job_def(job).run_config_schema.config_type
            op_fields = schema.fields["ops"].config_type.fields[op].config_type
            names = set(op_fields.fields["config"].config_type.fields)
            if stage.library is TrainConfig:  # the launch config adds the recipe's name
                names -= {"recipe"}
            wanted = {f.name for f in dataclasses.fields(stage.library)}
            wanted -= {e for e in stage.exclude if "." not in e}
            assert names == wanted, f"{job}.{op}: {sorted(wanted ^ names)}"


def test_no_dagster_module_declares_a_config_class_by_hand() -> None:
    """Settings live in the library; Dagster modules only generate from it."""
    offenders = []
    for folder in ("foundation", "pretrain_assets", "jobs", "sensors", "app"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and b.id == "Config" for b in node.bases
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert offenders == []
