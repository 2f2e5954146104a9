"""Admission decided by proxies on a synthetic corpus: real pools, real training (slow: 24
proxies; the decision logic's fast tests are in
``tests/unit/experiments/test_experiments_units.py``).

Two languages; the validation data measures both, the corpus holds little ``beta``. Anneals
(``proxy_tiny_anneal``, in process, 3 seeds), each continuing the ``proxy_tiny`` proxy of its
seed trained on the corpus; every new group gets its four arms: the corpus with it, without it,
with its floor (its own words shuffled) and with the basis's reserve of clean data of its kind:

- ``beta-0001`` (more of the scarce language) is worth as much as clean beta: admitted;
- ``alpha-0001`` (the other language's words shuffled) is worth no more than its floor:
  rejected;

and the floor and the reference part beyond their spread (the proxies can see).

    .venv/bin/pytest -q tests/unit/experiments/test_experiments_decisions.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pretrain.errors import DataError
from pretrain.experiments import registry
from pretrain.experiments.admission import AdmissionPolicy, admission_evidence, decide_admission
from pretrain.experiments.basis import BasisConfig, build_basis
from pretrain.experiments.run import (
    ExperimentResult,
    read_result,
    rescore_experiment,
    run_experiment,
)
from tests.helpers.experiments import synthetic_setup

SEEDS = (0, 1, 2)
BASE = ("alpha-0000", "beta-0000")
RECIPE = "proxy_tiny_anneal"  # as AdmissionConfig's default, an anneal of a shared proxy
KINDS = {"beta-0001": "beta", "alpha-0001": "alpha"}
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("experiments")


@pytest.fixture(scope="module")
def proxies(root: Path) -> dict[str, list[ExperimentResult]]:
    basis, pools = synthetic_setup(root)
    runs: dict[str, list[ExperimentResult]] = {}

    def run(spec: registry.ExperimentSpec) -> ExperimentResult:
        groups = registry.variant_groups(list(BASE), spec.variant)
        return run_experiment(
            spec, [p for g in groups for p in pools[g]], val_packed_dir=f"{basis}/validation",
            tokenizer_uri=f"{basis}/tokenizer", out_dir=str(Path(root) / "runs" / spec.name),
            base=runs["start"][spec.seed] if spec.base else None,
        )  # fmt: skip

    runs["start"] = [run(s) for s in registry.starts_of(RECIPE, SEEDS)]
    for group, kind in KINDS.items():
        arms = registry.admission_specs(group, recipe=RECIPE, seeds=SEEDS, probe_share=0.3,
                                        kind=kind)  # fmt: skip
        runs[group] = [run(s) for s in arms.with_]
        runs[f"floor:{group}"] = [run(s) for s in arms.floor]
        runs[f"reference:{kind}"] = [run(s) for s in arms.reference]
        if "base" not in runs:  # the corpus without either group: one arm for both
            runs["base"] = [run(s) for s in arms.without]
    return runs


def _decide(proxies: dict, group: str, judge: str = "own_source"):
    kind = KINDS[group]
    evidence = admission_evidence(
        group=group, with_runs=proxies[group], without_runs=proxies["base"],
        floor_runs=proxies[f"floor:{group}"], reference_runs=proxies[f"reference:{kind}"],
        sources={kind}, kind=kind,
    )  # fmt: skip
    assert AdmissionPolicy().judge == "own_source"  # the default
    return decide_admission(evidence, noise=None, cost=None, policy=AdmissionPolicy(judge=judge))


def test_scarce_clean_language_is_worth_clean_data_and_admitted(proxies: dict) -> None:
    decision = _decide(proxies, "beta-0001")
    assert decision.decision == "admit", decision.reason
    value = decision.relative
    assert value is not None and not decision.cannot_see and value.value >= 0.6
    assert decision.yardstick == "own" and decision.evidence.seeds == SEEDS
    assert value.separation > value.separation_spread  # the proxies see floor from reference


def test_shuffled_words_are_worth_their_floor_and_rejected(proxies: dict) -> None:
    decision = _decide(proxies, "alpha-0001")
    assert decision.decision == "reject", decision.reason
    value = decision.relative
    assert value is not None and not decision.cannot_see and value.value <= 0.3
    # its words alone: as the floor does, it displaces clean alpha and scores worse
    assert decision.evidence.delta_bpb["alpha"] > 0


def test_both_arms_of_a_seed_start_from_its_proxy(proxies: dict) -> None:
    for seed, start in enumerate(proxies["start"]):
        assert start.checkpoint and start.spec["base"] == ""
        for arm in (proxies["base"][seed], proxies["beta-0001"][seed],
                    proxies["floor:beta-0001"][seed], proxies["reference:beta"][seed]):  # fmt: skip
            assert arm.spec["base"] == start.name
            # the anneal begins where its start ended, far below a fresh model's loss
            assert arm.loss_curve[0][1] < start.loss_curve[0][1] - 1.0


def test_proxies_record_cost_and_a_loss_curve(proxies: dict) -> None:
    run = proxies["start"][0]
    assert run.cost["tokens"] > 0 and run.cost["flops"] > 0 and run.cost["train_s"] > 0
    assert run.cost["wall_s"] >= run.cost["train_s"] + run.cost["eval_s"]
    steps = [s for s, _ in run.loss_curve]
    assert steps == sorted(steps) and steps[-1] == run.cost["steps"]
    assert run.loss_curve[-1][1] < run.loss_curve[0][1]  # it learned something
    # the with arm read the group at its probe share of the budget
    assert proxies["beta-0001"][0].rows["beta-0001/beta"] == round(
        0.3 * sum(proxies["beta-0001"][0].rows.values())
    )


def test_a_finished_proxy_is_rescored_on_a_rebuilt_validation_set(
    proxies: dict, root: Path, tmp_path: Path
) -> None:
    start = proxies["start"][0]
    rerun = tmp_path / "start"
    shutil.copytree(root / "runs" / start.name, rerun)  # its checkpoint stays where it was
    # the same basis again: the same scores
    again = rescore_experiment(str(rerun), val_packed_dir=str(root / "basis" / "validation"),
                               tokenizer_uri=str(root / "basis" / "tokenizer"))  # fmt: skip
    assert again.bits_per_byte == pytest.approx(start.bits_per_byte, abs=1e-9)
    # a basis whose validation documents are cut shorter (the training side unchanged: the
    # same held-out documents, the same tokenizer) scores the same weights differently
    groups = [str(root / "groups" / g / "documents.parquet") for g in BASE]
    build_basis(groups, str(tmp_path / "basis"), BasisConfig(vocab_size=300, seq_len=64,
                val_fraction=0.2, val_docs_per_source=20, val_doc_chars=256,
                reserve_fraction=0.4))  # fmt: skip
    rescored = rescore_experiment(
        str(rerun), val_packed_dir=str(tmp_path / "basis" / "validation"),
        tokenizer_uri=str(tmp_path / "basis" / "tokenizer"),
    )  # fmt: skip
    assert rescored.bits_per_byte != pytest.approx(start.bits_per_byte, abs=1e-6)
    assert read_result(str(rerun)) == rescored
    for kept in ("train_s", "flops", "tokens", "steps"):
        assert rescored.cost[kept] == start.cost[kept]
    assert rescored.loss_curve == start.loss_curve and rescored.checkpoint == start.checkpoint
    with pytest.raises(DataError, match="rescore"):
        rescore_experiment(str(tmp_path / "nothing"), val_packed_dir="x", tokenizer_uri="y")
