"""The data-value engine's workflow as a pure function: what runs next, from plain state.

``next_steps`` is what ``experiment_sensor`` asks every tick; here it is asked without Dagster,
state by state, in the order a new shard group goes through: pools, start proxies, arms (the
shared ones once), the decision, a review; a search's candidates, verification and fit; a filter
arm's proxies. Then the sensor itself: an idle tick (nothing materialized since its last look)
reads nothing from the artifact store.

    .venv/bin/pytest -q tests/unit/experiments/test_experiments_workflow.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance, SkipReason, build_sensor_context

from pretrain import storage
from pretrain.experiments.admission import AdmissionConfig
from pretrain.experiments.config import DataVariant
from pretrain.experiments.corpus import AblationArm
from pretrain.experiments.workflow import (
    ExperimentState,
    SearchState,
    first_look_part,
    next_steps,
    plan_look,
)
from resources.storage import ArtifactStore
from sensors.experiments import experiment_sensor

CONFIG = AdmissionConfig(recipe="proxy_tiny_anneal", seeds=(0, 1))
ARMS = {
    "web-0007": ("with-7-s0", "with-7-s1", "base-s0", "base-s1", "floor-7-s0", "floor-7-s1",
                 "ref-web-s0", "ref-web-s1"),
    "web-0008": ("with-8-s0", "with-8-s1", "base-s0", "base-s1", "floor-8-s0", "floor-8-s1",
                 "ref-web-s0", "ref-web-s1"),
}  # fmt: skip


def state(**changes) -> ExperimentState:
    """Two basis groups, two new web groups awaiting a decision, everything current."""
    base = ExperimentState(
        basis_groups=("news-0000", "web-0000"),
        groups=("news-0000", "web-0000", "web-0007", "web-0008"),
        decisions={}, decided=frozenset(), stale_pools={},
        starts=("start-s0", "start-s1"), arms=ARMS,
    )  # fmt: skip
    return ExperimentState(**{**base.__dict__, **changes})


def asked(steps) -> list[tuple[str, str | None]]:
    return [(s.job, s.partition) for s in steps.requests]


def test_a_new_group_waits_for_its_pools_then_the_starts() -> None:
    stale = next_steps(state(stale_pools={"web-0007": "v1", "news-0000": "v2"}), CONFIG)
    assert asked(stale) == [("proxy_pools", "news-0000"), ("proxy_pools", "web-0007")]
    assert stale.requests[1].run_key == "pools:web-0007:v1"  # the documents' version
    starts = next_steps(state(), CONFIG)
    assert asked(starts) == [("proxy_runs", "start-s0"), ("proxy_runs", "start-s1")]
    assert starts.partitions == ("start-s0", "start-s1")


def test_the_arms_run_once_each_then_each_group_is_decided() -> None:
    done = frozenset({"start-s0", "start-s1"})
    first = next_steps(state(done=done), CONFIG)
    names = [p for _, p in asked(first)]
    # the without and reference arms are shared by both web groups: asked for once
    assert sorted(names) == sorted(set(ARMS["web-0007"]) | set(ARMS["web-0008"]))
    assert len(names) == len(set(names)) == 12
    finished = done | set(ARMS["web-0007"])
    second = next_steps(state(done=finished, versions={"with-7-s0": "a1"}), CONFIG)
    decide = [s for s in second.requests if s.job == "data_admission"]
    assert [s.partition for s in decide] == ["web-0007"]
    assert decide[0].run_key.startswith("admission:web-0007:")
    assert decide[0].settings == {"admission": {**decide[0].settings["admission"]}}
    assert decide[0].settings["admission"]["recipe"] == "proxy_tiny_anneal"
    again = next_steps(state(done=finished, versions={"with-7-s0": "a2"}), CONFIG)
    newer = [s for s in again.requests if s.job == "data_admission"]
    assert newer[0].run_key != decide[0].run_key  # a new result: a new decision
    blocked = next_steps(state(done=finished, blocked={"web-0007": "bad spec"}), CONFIG)
    assert "web-0007" not in [s.partition for s in blocked.requests]


def test_a_decided_group_is_left_alone_until_a_newer_review() -> None:
    decided = state(
        groups=("news-0000", "web-0000", "web-0007"),
        decisions={"web-0007": {"decision": "reject", "review": {"at": "20260101T000000Z"}}},
        decided=frozenset({"web-0007"}),
    )
    assert next_steps(decided, CONFIG).requests == ()
    same = ExperimentState(**{**decided.__dict__, "reviews": {"web-0007": "20260101T000000Z"}})
    assert next_steps(same, CONFIG).requests == ()
    newer = ExperimentState(**{**decided.__dict__, "reviews": {"web-0007": "20260102T000000Z"}})
    assert asked(next_steps(newer, CONFIG)) == [("data_admission", "web-0007")]
    assert next_steps(newer, CONFIG).requests[0].run_key == "review:web-0007:20260102T000000Z"


def test_a_search_runs_its_candidates_its_verification_then_its_fit() -> None:
    search = SearchState(
        search_id="search-x", settings={"verify": True}, names=("c0", "c1"),
        starts=("start-s0",), candidates_launched=False,
    )  # fmt: skip
    idle = state(groups=("news-0000", "web-0000"), arms={}, searches=(search,))
    assert next_steps(idle, CONFIG).requests == ()  # its start has not run
    ready = ExperimentState(**{**idle.__dict__, "done": frozenset({"start-s0"})})
    assert asked(next_steps(ready, CONFIG)) == [("proxy_runs", "c0"), ("proxy_runs", "c1")]
    run = frozenset({"start-s0", "c0", "c1"})
    unknown = ExperimentState(**{**idle.__dict__, "done": run})
    assert next_steps(unknown, CONFIG).requests == ()  # the proposal is not fitted yet
    checked = SearchState(**{**search.__dict__, "verification": ("proposal-s0",)})
    verify = ExperimentState(**{**unknown.__dict__, "searches": (checked,)})
    steps = next_steps(verify, CONFIG)
    assert asked(steps) == [("proxy_runs", "proposal-s0")]
    assert steps.partitions == ("proposal-s0",)
    fit = ExperimentState(**{**verify.__dict__, "done": run | {"proposal-s0"}})
    [step] = next_steps(fit, CONFIG).requests
    assert step.job == "mixture_search" and step.settings == {"search": {"verify": True}}


def test_a_filter_arm_trains_once_its_pools_are_made() -> None:
    arm = AblationArm(key="filt-1", variant=DataVariant(filter={"min_quality_score": 0.5}),
                      names=("filt-a-s0", "filt-a-s1"))  # fmt: skip
    idle = state(groups=("news-0000", "web-0000"), arms={}, ablations=(arm,))
    assert next_steps(idle, CONFIG).requests == ()
    ready = ExperimentState(**{**idle.__dict__, "ablations": (AblationArm(**{**arm.__dict__, "ready": True}),),
                               "done": frozenset({"filt-a-s0"})})  # fmt: skip
    assert asked(next_steps(ready, CONFIG)) == [("proxy_runs", "filt-a-s1")]


def test_an_idle_tick_reads_nothing_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first look reads a few files, not one per shard group (the groups and their decisions
    come from the instance); a tick whose instance shows no newer materialization of what the
    engine watches answers from the cursor alone: no artifact-store read at all."""
    (tmp_path / "home").mkdir()
    reads: list[str] = []
    for name in ("read_bytes_if_any", "exists", "list_files"):  # every file read
        real = getattr(storage, name)

        def counted(*args, _real=real, _name=name, **kwargs):  # the real functions, counted
            reads.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(storage, name, counted)
    store = ArtifactStore(root=str(tmp_path / "artifacts"))
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        instance.add_dynamic_partitions("shards", [f"web-{i:05d}" for i in range(2000)])

        def tick(cursor: str | None):
            with build_sensor_context(instance=instance, cursor=cursor,
                                      resources={"store": store}) as context:  # fmt: skip
                return experiment_sensor(context)

        first = tick(None)  # a first look: 2,000 groups, none of their files read
        assert "experiment_basis is not materialized" in first.skip_reason.skip_message
        assert 0 < len(reads) <= 3, reads[:5]
        reads.clear()
        idle = tick(first.cursor)
        assert isinstance(idle, SkipReason) and reads == [], reads[:5]
        stale = json.loads(first.cursor)
        stale["settings"] = "another admission config"
        assert not isinstance(tick(json.dumps(stale)), SkipReason)  # a new config: a full look


def test_a_first_look_larger_than_a_part_is_planned_part_by_part() -> None:
    """Pure: what each tick of a first look reads, from the cursor the last one left."""
    groups = [f"web-{i:04d}" for i in range(25)]
    decided, newest = frozenset(groups[:3]), {"deduped_shards": 7}
    whole, began, last = plan_look({}, same=False, groups=groups[:10], decided=decided,
                                   remade=frozenset(), newest=newest, part_size=10)  # fmt: skip
    assert whole.full and whole.only is None and last is None and began == newest
    first, began, last = plan_look({}, same=False, groups=groups, decided=decided,
                                   remade=frozenset(), newest=newest, part_size=10)  # fmt: skip
    assert first.only == frozenset(groups[:10]) and not first.full and last == "web-0009"
    going = {"after": last, "newest": began, "stale_pools": {"web-0003": "v1"}}
    later = {"deduped_shards": 9}  # materialized since the look began: looked at after it
    second, began, last = plan_look({"first_look": going}, same=False, groups=groups,
                                    decided=decided, remade=frozenset(), newest=later,
                                    part_size=10)  # fmt: skip
    assert second.only == frozenset(groups[10:20]) and second.stale_pools == {"web-0003": "v1"}
    assert began == newest and last == "web-0019"
    third, _, last = plan_look({"first_look": {**going, "after": last}}, same=False,
                               groups=groups, decided=decided, remade=frozenset(),
                               newest=later, part_size=10)  # fmt: skip
    assert third.only == frozenset(groups[20:]) and last is None  # the last part
    seen = {"stale_pools": {"web-0001": "v"}, "done": {"x": "1"}, "review_files": {}}
    changed, began, last = plan_look(seen, same=True, groups=groups, decided=decided,
                                     remade=frozenset({"r"}), newest=later)  # fmt: skip
    assert changed.remade == {"r"} and changed.done == {"x": "1"} and began == later
    assert last is None and not changed.full and changed.only is None


def test_parts_follow_names_so_a_removed_group_skips_nothing() -> None:
    groups = [f"web-{i:04d}" for i in range(6)]
    part, last = first_look_part(groups, None, 3)
    assert part == frozenset(groups[:3]) and last == "web-0002"
    del groups[0]  # removed while the first part was read
    part, last = first_look_part(groups, "web-0002", 3)
    assert part == frozenset(groups[2:]) and last is None
