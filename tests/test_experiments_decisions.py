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

from pathlib import Path

import pytest

from pretrain.experiments import registry
from pretrain.experiments.admission import AdmissionPolicy, admission_evidence, decide_admission
from pretrain.experiments.run import ExperimentResult, run_experiment
from tests.helpers.experiments import synthetic_setup

SEEDS = (0, 1)
BASE = ("alpha-0000", "beta-0000")
RECIPE = "proxy_tiny_anneal"  # as AdmissionConfig's default, an anneal of a shared proxy


@pytest.fixture(scope="module")
def proxies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[ExperimentResult]]:
    root = tmp_path_factory.mktemp("experiments")
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


def _decide(proxies: dict, group: str):
    evidence = admission_evidence(
        group=group, with_runs=proxies[group], without_runs=proxies["base"]
    )
    return decide_admission(evidence, noise=None, cost=None, policy=AdmissionPolicy())


def test_scarce_clean_language_is_admitted(proxies: dict) -> None:
    decision = _decide(proxies, "beta-0001")
    assert decision.decision == "admit", decision.reason
    evidence = decision.evidence
    assert evidence.delta_bpb["beta"] < 0 and evidence.delta_bpb["mean"] < -0.05
    assert abs(evidence.delta_bpb["mean"]) > evidence.spread_bpb["mean"]
    assert evidence.seeds == SEEDS


def test_shuffled_words_are_rejected(proxies: dict) -> None:
    decision = _decide(proxies, "alpha-0001")
    assert decision.decision == "reject", decision.reason
    evidence = decision.evidence
    assert evidence.delta_bpb["alpha"] > 0 and evidence.delta_bpb["mean"] > 0.05
    assert abs(evidence.delta_bpb["mean"]) > evidence.spread_bpb["mean"]


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
