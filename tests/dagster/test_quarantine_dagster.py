"""Quarantine wiring against a real Dagster instance: which decisions the sensor picks up, the
errors an operator sees (a malformed decision tag is skipped with a warning by the sensor and
``pretrain status``; a review without a reviewer says what to set), and the review recorded in
run tags (no training: fast)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    Failure,
    build_sensor_context,
    instance_for_test,
    materialize,
)

from app.cli import main as cli_main
from app.definitions import ASSETS
from foundation.campaign import campaign_decisions, rollback_spikes
from foundation.decisions import decision_id, rollback_decisions, skip_record
from pretrain import identity, storage
from pretrain.errors import ConfigError
from pretrain.recovery.policy import Decision
from resources.launcher import TorchrunLauncher
from resources.metrics import WandbMetricsReader
from resources.storage import ArtifactStore
from sensors.recovery.quarantine import quarantine_sensor
from tests.helpers.logs import ListHandler

ROLLBACK = Decision(
    action="rollback", reason="loss spike", kind="bad_batch", branch="b00", spike_step=41,
    checkpoint_key="b00-s000000030", checkpoint_path="/runs/b00/step-00000030",
    skip_window=(41, 43), new_branch="b01",
)  # fmt: skip


@pytest.fixture
def instance() -> Any:
    with instance_for_test() as inst:
        yield inst


def stopped_run(instance: DagsterInstance, decision: Decision, by: str = "loss_spike_sensor"):
    run = DagsterRun(
        job_name="train",
        run_id=str(uuid.uuid4()),
        status=DagsterRunStatus.CANCELED,
        tags={**decision.run_tags(), "pretrain/stopped_by": by},
    )
    instance.add_run(run)
    return run


def test_sensor_adds_one_partition_per_rollback_that_skipped_data(
    instance: DagsterInstance,
) -> None:
    assert quarantine_sensor(build_sensor_context(instance=instance)).skip_reason is not None
    run = stopped_run(instance, ROLLBACK)
    stopped_run(instance, Decision(action="stop", reason="escalation", branch="b01"))
    stopped_run(instance, ROLLBACK.__class__(**{**ROLLBACK.__dict__, "spike_step": 7}), by="lr")
    assert list(rollback_decisions(instance)) == ["b00-s000000041-to-b01"]
    result = quarantine_sensor(build_sensor_context(instance=instance))
    [request] = result.run_requests
    assert (request.partition_key, request.run_key) == (
        "b00-s000000041-to-b01",
        "quarantine-b00-s000000041-to-b01",
    )
    assert request.tags["pretrain/training_run_id"] == run.run_id
    assert list(result.dynamic_partitions_requests[0].partition_keys) == [decision_id(ROLLBACK)]


def tagged_run(instance: DagsterInstance, decision_tag: str) -> DagsterRun:
    """A train run the loss-spike sensor stopped, whose decision tag is ``decision_tag``."""
    run = DagsterRun(
        job_name="train",
        run_id=str(uuid.uuid4()),
        status=DagsterRunStatus.CANCELED,
        tags={"pretrain/decision": decision_tag, "pretrain/stopped_by": "loss_spike_sensor"},
    )
    instance.add_run(run)
    return run


def test_a_malformed_decision_tag_is_skipped_with_a_warning_by_the_sensor_and_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the instance `pretrain status` opens
    with DagsterInstance.get() as instance:
        good = stopped_run(instance, ROLLBACK)
        garbage = tagged_run(instance, "{not json")
        wrong_type = tagged_run(
            instance, ROLLBACK.to_json().replace('"spike_step": 41', '"spike_step": "41"')
        )
        context = build_sensor_context(instance=instance)
        seen = ListHandler()
        context.log.addHandler(seen)
        result = quarantine_sensor(context)  # a real tick: every other rollback still counts
        assert [r.partition_key for r in result.run_requests] == [decision_id(ROLLBACK)]
        warnings = {r.getMessage() for r in seen.records if r.levelno == logging.WARNING}
        assert warnings == {
            f"run {garbage.run_id}: tag pretrain/decision '{{not json' is not a recovery "
            "decision: Expecting property name enclosed in double quotes: line 1 column 2 "
            "(char 1); skipped (restore the JSON the recovery sensor wrote, or remove the run "
            "if it is not a training run)",
            next(w for w in warnings if wrong_type.run_id in w),
        }
        assert "spike_step='41' has the wrong type" in next(
            w for w in warnings if wrong_type.run_id in w
        )
    assert cli_main(["status", "--root", str(tmp_path / "artifacts")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"warning: run {garbage.run_id}: tag pretrain/decision '{{not json' is not a" in (
        " ".join(out)
    )
    assert sum(line.startswith("warning: run ") for line in out) == 2
    assert f"decision on run {good.run_id[:8]}: rollback — loss spike" in out


def test_the_campaign_budget_and_chart_skip_a_malformed_decision_tag(
    instance: DagsterInstance,
) -> None:
    """``rollback_spikes`` (the recovery sensor's durable budget) and the loss chart's decisions
    read the same tags: a malformed one is skipped with a warning naming its run."""
    runs = [stopped_run(instance, ROLLBACK), tagged_run(instance, "{not json")]
    later = Decision(**{**ROLLBACK.__dict__, "spike_step": 90, "branch": "b01"})
    runs.append(stopped_run(instance, later))
    warned: list[str] = []
    assert rollback_spikes(runs, warned.append) == (41, 90)
    [warning] = warned
    assert warning.startswith(f"run {runs[1].run_id}: tag pretrain/decision '{{not json' is not")
    assert [d.spike_step for d in campaign_decisions(runs, warned.append)] == [41, 90]


# a step's ConfigError fails it at once: Dagster's Failure, raised from the ConfigError and
# naming it (the pretrain command prints that one line)
STEP_ERROR = (ConfigError, Failure)


def test_missing_trainer_config_and_unknown_decision_are_clear(
    instance: DagsterInstance, tmp_path: Path
) -> None:
    run = stopped_run(instance, ROLLBACK)
    with pytest.raises(ConfigError, match="no trainer config .*run-"):
        skip_record(decision_id(ROLLBACK), run, ROLLBACK, str(tmp_path / "runs"), None)
    store = ArtifactStore(root=str(tmp_path))
    resources = {
        "store": store,
        "metrics": WandbMetricsReader(run_root=str(tmp_path / "runs")),
        "proxy_launcher": TorchrunLauncher(nproc_per_node=1),  # every asset's resources
    }
    instance.add_dynamic_partitions("quarantine_decisions", ["b09-s000000001-to-b10"])
    with pytest.raises(STEP_ERROR, match="no rollback decision 'b09-s000000001-to-b10'"):
        materialize(
            ASSETS, selection=[AssetKey("quarantined_documents")], instance=instance,
            resources=resources, partition_key="b09-s000000001-to-b10",
        )  # fmt: skip


def test_review_is_recorded_in_run_tags_and_resolved(
    instance: DagsterInstance, tmp_path: Path
) -> None:
    store = ArtifactStore(root=str(tmp_path))
    resources = {
        "store": store,
        "metrics": WandbMetricsReader(run_root=str(tmp_path / "runs")),
        "proxy_launcher": TorchrunLauncher(nproc_per_node=1),  # every asset's resources
    }
    docs = pa.table(
        {"doc_id": ["a", "b"], "source": ["web", "code"], "source_id": [None, "x-1"],
         "tokens": [30, 10], "suspicion": [3.0, 0.1], "decision_id": ["d1", "d1"]}
    )  # fmt: skip
    storage.replace_dir(
        {"documents.parquet": _parquet(docs)}, store.uri("quarantined_documents", "d1")
    )

    def review(**config: Any) -> Any:
        return materialize(
            ASSETS, selection=[AssetKey("confirmed_quarantine")], instance=instance,
            resources=resources, run_config={"ops": {"confirmed_quarantine": {"config": config}}},
        )  # fmt: skip

    with pytest.raises(STEP_ERROR, match="no quarantine for decision 'd2'"):
        review(decision_id="d2", action="confirm", reviewer="ana", reason="x")
    with pytest.raises(STEP_ERROR, match=r"needs reviewer \(who decided, e.g. your name\)"):
        review(decision_id="d1", action="confirm", reviewer="", reason="x")
    # no reviewer at all: the same ConfigError saying what to set, not a constructor TypeError
    needs = (
        r"confirmed_quarantine launch config \(ops: confirmed_quarantine: config:\): a quarantine "
        r"review needs reviewer \(who decided, e.g. your name\) and reason \(why, in a "
        r"sentence\): set reviewer and reason"
    )
    with pytest.raises(STEP_ERROR, match=needs):
        review(decision_id="d1", action="confirm")
    with pytest.raises(STEP_ERROR, match="set action to one of confirm, release, extend"):
        review(decision_id="d1", reviewer="ana", reason="x")
    pending = review()  # re-resolve only: nothing reviewed yet, nothing excluded
    meta = pending.asset_materializations_for_node("confirmed_quarantine")[0].metadata
    assert meta["confirmed_documents"].value == 0 and meta["pending_decisions"].value == ["d1"]
    mixture = build_mixture(instance, store, resources)
    assert mixture["quarantined_docs"].value == 0 and not is_stale(instance)

    done = review(decision_id="d1", action="confirm", reviewer="ana", reason="junk", min_score=1.0)
    tags = instance.get_run_by_id(done.run_id).tags
    assert (tags["pretrain/reviewer"], tags["pretrain/review_reason"]) == ("ana", "junk")
    assert tags["pretrain/review_decision"] == "d1"
    meta = done.asset_materializations_for_node("confirmed_quarantine")[0].metadata
    assert meta["confirmed_documents"].value == 1 and meta["confirmed_tokens"].value == 30
    assert "| web | 1 | 30 | 100.0% |" in meta["confirmed_source_view_md"].value
    confirmed = storage.read_table(store.uri("confirmed_quarantine", "confirmed.parquet"))
    assert confirmed["doc_id"].to_pylist() == ["a"]
    assert is_stale(instance)  # the UI marks data_mixture stale: its quarantine input changed
    mixture = build_mixture(instance, store, resources)
    assert mixture["quarantined_docs"].value == 1 and not is_stale(instance)
    assert mixture["quarantine"].value["excluded_by_reason"] == {"quarantine d1": 1}
    review()  # re-resolving the same reviews changes nothing downstream
    assert not is_stale(instance)


def build_mixture(instance: DagsterInstance, store: ArtifactStore, resources: dict) -> Any:
    """``data_mixture`` over one shard holding "a" and 39 other documents."""
    if not instance.get_dynamic_partitions("shards"):
        instance.add_dynamic_partitions("shards", ["s0"])
        docs = [{"id": i, "text": f"text of {i} " * 20, "source": "web"} for i in ["a"]]
        docs += [{"id": f"w{i}", "text": f"web text {i} " * 20, "source": "web"} for i in range(39)]
        uri = store.uri("deduped_shards", "s0", "documents.parquet")
        storage.write_table(pa.Table.from_pylist(docs), uri)
        identity.adopt(store.uri("deduped_shards", "s0"), "deduped_shards")
    result = materialize(
        ASSETS, selection=[AssetKey("data_mixture")], instance=instance, resources=resources,
        run_config={"ops": {"data_mixture": {"config": {"decontam": None}}}},
    )  # fmt: skip
    return result.asset_materializations_for_node("data_mixture")[0].metadata


def is_stale(instance: DagsterInstance) -> bool:
    """The mixture was built from another version of the confirmed quarantine than the latest
    (what the UI's "stale" badge compares)."""
    mixture = instance.get_latest_materialization_event(AssetKey("data_mixture"))
    quarantine = instance.get_latest_materialization_event(AssetKey("confirmed_quarantine"))
    used = mixture.asset_materialization.tags["dagster/input_data_version/confirmed_quarantine"]
    return used != quarantine.asset_materialization.tags["dagster/data_version"]


def _parquet(table: pa.Table) -> bytes:
    import io

    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
