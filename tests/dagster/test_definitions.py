"""Dagster wiring: the Definitions load, the graph matches DESIGN.md, run configs validate."""

import dataclasses

from dagster import AssetKey, DynamicPartitionsDefinition, validate_run_config

from app.definitions import build_definitions
from foundation.stages import run_configs
from pretrain.experiments.admission import AdmissionConfig
from pretrain.experiments.search import SearchConfig
from sensors.experiments import admission_run_config
from tests.helpers.graph import EXPECTED_EDGES, HISTORY_CHECKS, HISTORY_PARTITIONS

# the stage assets, each with a job named after it, in pipeline order
STAGE_JOBS = (
    "scaling_plan",
    "raw_shards",
    "quality_classifier",
    "toxicity_classifier",
    "filtered_shards",
    "minhash_signatures",
    "dedup_pairs",
    "dedup_clusters",
    "deduped_shards",
    "data_mixture",
    "tokenizer",
    "packed_tokens",
    "eval_reports",
)


def test_definitions_load_with_every_asset_and_edge(tmp_path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {"raw_shards", "scaling_plan", *EXPECTED_EDGES}
    for child, parents in EXPECTED_EDGES.items():
        found = {p.to_user_string() for p in graph.get(AssetKey(child)).parent_keys}
        assert found == parents, child


def test_an_instance_history_keeps_its_keys(tmp_path) -> None:
    """Asset keys, check names and dynamic partition names are what earlier layouts recorded."""
    graph = build_definitions(artifact_root=str(tmp_path)).resolve_asset_graph()
    checks: dict[str, set[str]] = {}
    for key in graph.asset_check_keys:
        checks.setdefault(key.asset_key.to_user_string(), set()).add(key.name)
    assert checks == HISTORY_CHECKS
    dynamic = {
        key.to_user_string(): graph.get(key).partitions_def.name
        for key in graph.get_all_asset_keys()
        if isinstance(graph.get(key).partitions_def, DynamicPartitionsDefinition)
    }
    assert dynamic == HISTORY_PARTITIONS
    assert graph.get(AssetKey("dedup_pairs")).partitions_def.get_partition_keys()[0] == "exact-s000"


def test_jobs_are_named_after_what_they_materialize(tmp_path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    for key in defs.resolve_asset_graph().get_all_asset_keys():
        asset = key.to_user_string()
        if asset == "checkpoints":  # written by the train job while it runs
            continue
        job = defs.resolve_job_def(f"{asset}_job")
        assert job.asset_layer.selected_asset_keys == {key}, asset


def test_module_level_defs_load() -> None:
    from dagster import Definitions

    from app import definitions

    Definitions.validate_loadable(definitions.defs)  # what the code server does
    assert definitions.defs.resolve_job_def("train").name == "train"


def test_every_asset_has_checks(tmp_path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    graph = defs.resolve_asset_graph()
    checked = {k.asset_key.to_user_string() for k in graph.asset_check_keys}
    assert checked >= set(STAGE_JOBS) - {"toxicity_classifier"}


def test_job_run_configs_validate(tmp_path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    train = defs.resolve_job_def("train")
    ok = validate_run_config(
        train,
        {
            "ops": {
                "train_model": {
                    "config": {"run": {"max_steps": 10, "lr_scale": 0.8, "skip_windows": [[5, 7]]}}
                }
            }
        },
    )
    assert ok["ops"]["train_model"]["config"]["run"]["max_steps"] == 10
    for name in STAGE_JOBS:
        assert validate_run_config(defs.resolve_job_def(f"{name}_job"), {}) is not None
    review = {
        "ops": {
            "confirmed_quarantine": {
                "config": {
                    "decision_id": "b00-s000000041-to-b01",
                    "action": "confirm",
                    "reviewer": "ana",
                    "reason": "random tokens",
                    "min_score": 1.0,
                }
            }
        }
    }
    assert validate_run_config(defs.resolve_job_def("confirmed_quarantine_job"), review) is not None
    bad = {"ops": {"train_model": {"config": {"run": {"max_steps": "many"}}}}}
    try:
        validate_run_config(train, bad)
    except Exception as exc:  # DagsterInvalidConfigError
        assert "max_steps" in str(exc)
    else:
        raise AssertionError("an invalid run config validated")


def test_recovery_and_eval_sensors_are_registered(tmp_path) -> None:
    defs = build_definitions(artifact_root=str(tmp_path))
    names = {s.name for s in defs.get_repository_def().sensor_defs}
    assert names == {
        "eval_sensor",
        "loss_spike_sensor",
        "lr_sensor",
        "training_failure_sensor",
        "shard_discovery_sensor",
        "quarantine_sensor",
        "experiment_sensor",
    }
    schedules = {s.name for s in defs.get_repository_def().schedule_defs}
    assert schedules == {"shard_backfill_schedule"}


def test_one_s3_endpoint_for_the_store_and_the_launcher(monkeypatch, tmp_path) -> None:
    """The artifact store's endpoint is the launcher's (what the jobs get as AWS_ENDPOINT_URL);
    a launcher config naming another one is refused; the store sets AWS_ENDPOINT_URL only while
    an execution runs."""
    import os

    import pytest
    from dagster import build_resources

    from pretrain.errors import ConfigError
    from resources.storage import ArtifactStore

    monkeypatch.setenv("PRETRAIN_LAUNCHER", "slurm")
    monkeypatch.setenv("PRETRAIN_LAUNCHER_CONFIG", '{"nodes": 1, "s3": {"region_name": "eu"}}')
    defs = build_definitions(str(tmp_path), s3_endpoint_url="http://127.0.0.1:9")
    store = defs.resources["store"]
    launcher = defs.resources["launcher"]
    assert store.s3_endpoint_url == launcher.s3.endpoint_url == "http://127.0.0.1:9"
    assert launcher.s3.region_name == "eu"
    monkeypatch.setenv("PRETRAIN_LAUNCHER_CONFIG", '{"s3": {"endpoint_url": "http://other"}}')
    with pytest.raises(ConfigError, match="set the endpoint once"):
        build_definitions(str(tmp_path), s3_endpoint_url="http://127.0.0.1:9")

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://before")
    with build_resources({"store": ArtifactStore(root="s3://b", s3_endpoint_url="http://during")}):
        assert os.environ["AWS_ENDPOINT_URL"] == "http://during"
    assert os.environ["AWS_ENDPOINT_URL"] == "http://before"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    with build_resources({"store": ArtifactStore(root="s3://b", s3_endpoint_url="http://during")}):
        assert os.environ["AWS_ENDPOINT_URL"] == "http://during"
    assert "AWS_ENDPOINT_URL" not in os.environ


def test_library_configs_validate_as_run_configs(tmp_path) -> None:
    """A library config passed whole (``dataclasses.asdict``: sequences are tuples) is a valid
    run config: the demo launches its fit this way, the sensor its admission decisions."""
    defs = build_definitions(artifact_root=str(tmp_path))
    search = SearchConfig(candidates=6, seeds=(0, 1), recipe="proxy_tiny")
    fit = run_configs({"search": dataclasses.asdict(search)})["mixture_search_job"]
    assert validate_run_config(defs.resolve_job_def("mixture_search_job"), fit) is not None
    decide = admission_run_config(AdmissionConfig(recipe="proxy_tiny", seeds=(3, 4)))
    checked = validate_run_config(defs.resolve_job_def("data_admission_job"), decide)
    assert checked["ops"]["data_admission"]["config"]["seeds"] == [3, 4]
