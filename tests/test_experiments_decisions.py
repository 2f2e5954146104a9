"""Admission decided by proxies on a synthetic corpus (fast tier): real pools, real training.

Two languages; the validation data measures both, the corpus holds little ``beta``. Anneals
(``proxy_tiny_anneal``, in process, 2 seeds), each continuing the ``proxy_tiny`` proxy of its
seed trained on the corpus, with and without each new group:

- ``beta-0001`` (more of the scarce language) must be admitted;
- ``alpha-0001`` (the other language's words shuffled) must be rejected;

and each change must exceed its seed spread, as the policy requires.

    .venv/bin/pytest -q tests/test_experiments_decisions.py
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

SEEDS = (0, 1)
BASE = ("alpha-0000", "beta-0000")
RECIPE = "proxy_tiny_anneal"  # as AdmissionConfig's default, an anneal of a shared proxy


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("experiments")


@pytest.fixture(scope="module")
def proxies(root: Path) -> dict[str, list[ExperimentResult]]:
    basis, pools = synthetic_setup(root)
    runs: dict[str, list[ExperimentResult]] = {}

    def run(spec: registry.ExperimentSpec, groups: list[str]) -> ExperimentResult:
        return run_experiment(
            spec, [p for g in groups for p in pools[g]], val_packed_dir=f"{basis}/validation",
            tokenizer_uri=f"{basis}/tokenizer", out_dir=str(Path(root) / "runs" / spec.name),
            base=runs["start"][spec.seed] if spec.base else None,
        )  # fmt: skip

    starts = registry.starts_of(RECIPE, SEEDS)
    runs["start"] = [run(s, list(BASE)) for s in starts]
    for group in ("beta-0001", "alpha-0001"):
        with_, without = registry.admission_specs(group, recipe=RECIPE, seeds=SEEDS,
                                                  probe_share=0.3)  # fmt: skip
        runs[group] = [run(s, [*BASE, group]) for s in with_]
        if "base" not in runs:  # the corpus without either group: one arm for both
            runs["base"] = [run(s, list(BASE)) for s in without]
    return runs


def _decide(proxies: dict, group: str, judge: str = "own_source"):
    evidence = admission_evidence(
        group=group, with_runs=proxies[group], without_runs=proxies["base"],
        sources={group.split("-")[0]},
    )  # fmt: skip
    assert AdmissionPolicy().judge == "own_source"  # the default
    return decide_admission(evidence, noise=None, cost=None, policy=AdmissionPolicy(judge=judge))


@pytest.mark.parametrize("judge", ["own_source", "mean"])
def test_scarce_clean_language_is_admitted(proxies: dict, judge: str) -> None:
    decision = _decide(proxies, "beta-0001", judge)
    assert decision.decision == "admit", decision.reason
    evidence = decision.evidence
    assert evidence.delta_bpb["own"] == evidence.delta_bpb["beta"] < -0.05
    assert evidence.delta_bpb["mean"] < -0.05
    for key in ("own", "mean"):
        assert abs(evidence.delta_bpb[key]) > evidence.spread_bpb[key]
    assert evidence.seeds == SEEDS
    assert ("own source's (beta)" in decision.reason) == (judge == "own_source")


@pytest.mark.parametrize("judge", ["own_source", "mean"])
def test_shuffled_words_are_rejected(proxies: dict, judge: str) -> None:
    decision = _decide(proxies, "alpha-0001", judge)
    assert decision.decision == "reject", decision.reason
    evidence = decision.evidence
    assert evidence.delta_bpb["own"] == evidence.delta_bpb["alpha"] > 0
    assert evidence.delta_bpb["mean"] > 0.05
    for key in ("own", "mean"):
        assert abs(evidence.delta_bpb[key]) > evidence.spread_bpb[key]


def test_both_arms_of_a_seed_start_from_its_proxy(proxies: dict) -> None:
    for seed, start in enumerate(proxies["start"]):
        assert start.checkpoint and start.spec["base"] == ""
        for arm in (proxies["base"][seed], proxies["beta-0001"][seed]):
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
                val_fraction=0.2, val_docs_per_source=20, val_doc_chars=256))  # fmt: skip
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
