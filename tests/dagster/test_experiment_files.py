"""One bad file never stops the data-value engine (issue 38, §1 and §2).

A store as a small demo leaves it (an experiment basis of two shard groups, a third group
decided, an operator's review of it not applied yet), with identities written by hand and no
proxy trained, so each case runs in well under a second. Then one bad file is planted, as a hand
edit, a copy cut short or another tool would leave it, and a real ``experiment_sensor`` tick
must still ask for the review's ``decide_admission`` run and name the bad file in its log; a
review that is not valid must never ask for one. ``pretrain experiments list|compare`` and
``pretrain plan`` skip a spec they cannot read with a one-line warning::

    .venv/bin/pytest -q tests/dagster/test_experiment_files.py
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetMaterialization,
    DagsterInstance,
    SensorResult,
    build_sensor_context,
)

from app.cli import main as cli_main
from pretrain import identity, storage
from pretrain.errors import DataError
from pretrain.experiments import registry
from pretrain.experiments.config import DataVariant, ExperimentSpec
from pretrain.experiments.decisions import latest_review, read_decisions
from resources.storage import ArtifactStore
from sensors.experiments import experiment_sensor
from tests.helpers.logs import ListHandler

BASIS = ("alpha-0000", "beta-0000")
DECIDED = ("gamma-0000", "delta-0000")
REVIEW = {"decision": "admit", "reviewer": "ana", "reason": "the news we lack"}
REVIEW_AT = "20260101T000000Z"


def made(uri: str, stage: str, inputs: dict[str, str] | None = None) -> str:
    """Give the output at ``uri`` an identity, as a completed materialization does."""
    version = f"{stage}-{storage.basename(uri)}"
    ident = identity.Identity(stage=stage, code_version="t", config_hash="h",
                              inputs=inputs or {}, version=version)  # fmt: skip
    identity.write(uri, ident)
    return version


def review_file(store: ArtifactStore, group: str, at: str, run_id: str, **record: Any) -> Path:
    path = Path(store.uri("admission_reviews", group, f"{at}-{run_id}.json"))
    storage.write_json({**record, "group": group, "at": at, "run_id": run_id}, str(path))
    return path


@pytest.fixture
def demo(tmp_path: Path) -> Any:
    """(instance, store): every group pooled and current, gamma and delta decided by the
    policy, and a review of gamma that its decision has not applied."""
    store = ArtifactStore(root=str(tmp_path / "artifacts"))
    with DagsterInstance.ephemeral() as instance:
        groups = [*BASIS, *DECIDED]
        instance.add_dynamic_partitions("shards", groups)
        for group in groups:  # the instance records what the stages completed
            deduped = store.uri("deduped_shards", group)
            made(store.uri("proxy_pools", group), "proxy_pools", {deduped: made(deduped, "dd")})
            instance.report_runless_asset_event(
                AssetMaterialization("deduped_shards", partition=group)
            )
        made(store.uri("experiment_basis"), "experiment_basis")
        storage.write_json({"shard_groups": list(BASIS), "seq_len": 64},
                           store.uri("experiment_basis", "basis.json"))  # fmt: skip
        for group in DECIDED:
            storage.write_json({"group": group, "decision": "reject", "decided_by": "policy"},
                               store.uri("data_admission", group, "decision.json"))  # fmt: skip
            instance.report_runless_asset_event(
                AssetMaterialization("data_admission", partition=group)
            )
        review_file(store, "gamma-0000", REVIEW_AT, "r1", **REVIEW)
        yield instance, store


def tick(instance: DagsterInstance, store: ArtifactStore) -> tuple[list[str], list[str]]:
    """(the run keys one real tick asks for, the warnings it logged)."""
    with build_sensor_context(instance=instance, resources={"store": store}) as context:
        seen = ListHandler()
        context.log.addHandler(seen)
        result = experiment_sensor(context)
    keys = [r.run_key for r in result.run_requests] if isinstance(result, SensorResult) else []
    warnings = [r.getMessage() for r in seen.records if r.levelno == logging.WARNING]
    return keys, warnings


GAMMA_REVIEWED = f"review:gamma-0000:{REVIEW_AT}"


def test_the_review_is_asked_for_when_every_file_is_good(demo: Any) -> None:
    assert tick(*demo) == ([GAMMA_REVIEWED], [])


def _bad_review_json(_: DagsterInstance, store: ArtifactStore) -> Path:
    path = Path(store.uri("admission_reviews", "gamma-0000", "20991231T000000Z-x.json"))
    path.write_text('{"decision": "rej')
    return path


def _review_without_at(_: DagsterInstance, store: ArtifactStore) -> Path:
    path = review_file(store, "delta-0000", "20260102T000000Z", "r2", **REVIEW)
    record = json.loads(path.read_text())
    del record["at"]
    path.write_text(json.dumps(record))
    return path


def _truncated_decision(_: DagsterInstance, store: ArtifactStore) -> Path:
    path = Path(store.uri("data_admission", "delta-0000", "decision.json"))
    path.write_text(path.read_text()[:20])
    return path


def _search_record_of_the_wrong_type(_: DagsterInstance, store: ArtifactStore) -> Path:
    path = Path(store.uri("mixture_search", "launched", "search-0bad0bad.json"))
    storage.write_json({"config": {"candidates": "many"}}, str(path))
    return path


def _truncated_spec(instance: DagsterInstance, store: ArtifactStore) -> Path:
    """A start proxy's spec cut short, with a group awaiting its admission."""
    [start] = registry.starts_of("proxy_cpu_anneal", (0,))
    path = Path(registry.spec_uri(store.root, start.name))
    path.parent.mkdir(parents=True)
    path.write_text(start.to_json()[:40])
    pending = "epsilon-0000"  # a new group, pooled, without a decision
    instance.add_dynamic_partitions("shards", [pending])
    deduped = store.uri("deduped_shards", pending)
    made(store.uri("proxy_pools", pending), "proxy_pools", {deduped: made(deduped, "dd")})
    instance.report_runless_asset_event(AssetMaterialization("deduped_shards", partition=pending))
    return path


@pytest.mark.parametrize(
    "plant",
    [_bad_review_json, _review_without_at, _truncated_decision, _search_record_of_the_wrong_type,
     _truncated_spec],
)  # fmt: skip
def test_one_bad_file_is_skipped_and_named_and_the_tick_goes_on(demo: Any, plant: Any) -> None:
    instance, store = demo
    bad = plant(instance, store)
    keys, warnings = tick(instance, store)
    assert keys == [GAMMA_REVIEWED]  # the rest is done as usual
    assert len(warnings) == 1 and str(bad) in warnings[0], warnings
    assert tick(instance, store) == (keys, warnings)  # every tick, until the file is fixed


@pytest.mark.parametrize(
    "review, why",
    [({**REVIEW, "decision": "yes-please"}, "decision='yes-please'"),
     ({"decision": "reject", "reason": "spam"}, "it has no 'reviewer'"),
     ({**REVIEW, "reviewer": " "}, "needs a reviewer and a reason")],
)  # fmt: skip
def test_a_review_that_is_not_valid_never_asks_for_a_decision(
    demo: Any, review: dict[str, str], why: str
) -> None:
    instance, store = demo
    bad = review_file(store, "delta-0000", "20260103T000000Z", "r3", **review)
    keys, warnings = tick(instance, store)
    assert keys == [GAMMA_REVIEWED]  # delta is not re-decided
    assert len(warnings) == 1 and str(bad) in warnings[0] and why in warnings[0], warnings
    reviews = store.uri("admission_reviews")
    with pytest.raises(DataError, match=why):  # the admission's own read refuses it too
        latest_review(reviews, "delta-0000")
    assert latest_review(reviews, "delta-0000", warn=lambda _: None) is None


def test_an_unknown_decision_is_refused_where_decisions_are_read(demo: Any) -> None:
    _, store = demo
    decision = Path(store.uri("data_admission", "delta-0000", "decision.json"))
    decision.write_text(json.dumps({"group": "delta-0000", "decision": "yes-please"}))
    with pytest.raises(DataError, match=f"{decision} is not an admission decision: decision"):
        read_decisions(store.uri("data_admission"))  # the mixture must not guess
    skipped: list[str] = []
    assert read_decisions(store.uri("data_admission"), warn=skipped.append) == {
        "gamma-0000": "reject"
    }
    assert len(skipped) == 1 and str(decision) in skipped[0]


def test_a_spec_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    spec = ExperimentSpec(name="mix-a-s0", variant=DataVariant(weights={"web": 1.0}))
    registry.register(str(tmp_path), spec)
    uri = Path(registry.spec_uri(str(tmp_path), spec.name))
    uri.write_text(spec.to_json()[:30])
    with pytest.raises(DataError, match=f"{uri} is not valid JSON"):
        registry.load_spec(str(tmp_path), spec.name)
    with pytest.raises(DataError, match=f"{uri} is not valid JSON"):
        registry.register(str(tmp_path), spec)  # never overwritten unseen
    uri.write_text(json.dumps({**spec.to_dict(), "seed": "0"}))
    with pytest.raises(DataError, match=rf"{uri} is not an experiment spec: .*seed"):
        registry.list_specs(str(tmp_path))


def test_list_compare_and_plan_skip_a_spec_they_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "artifacts")
    for name in ("mix-good-s0", "mix-cut-s0"):
        spec = ExperimentSpec(name=name, variant=DataVariant(), group="g")
        registry.register(root, spec)
    cut = Path(registry.spec_uri(root, "mix-cut-s0"))
    cut.write_text(cut.read_text()[:25])
    for args in (["experiments", "list", "--root", root],
                 ["experiments", "--root", root, "compare", "--group", "g"],
                 ["plan", "--root", root, "--gpus", "8", "--days", "1"]):  # fmt: skip
        assert cli_main(args) == 0, args
        out, err = capsys.readouterr()
        [line] = err.splitlines()
        command = args[0]
        assert line.startswith(f"pretrain {command}: warning: {cut} is not valid JSON"), line
        assert line.endswith("(skipped)"), line
        if args[1] == "list":
            assert "mix-good-s0" in out and "mix-cut-s0" not in out
