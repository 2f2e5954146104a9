"""The data-value engine's pure parts: views, searches, the admission policy, the registry.

.venv/bin/pytest -q tests/unit/experiments/test_experiments_units.py
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet
import pytest

from pretrain.errors import ConfigError, DataError
from pretrain.experiments import registry
from pretrain.experiments.ablation import with_overrides
from pretrain.experiments.admission import (
    CANNOT_SEE,
    AdmissionEvidence,
    AdmissionPolicy,
    AdmissionReview,
    CleaningCost,
    NoiseRisk,
    admission_evidence,
    corpus_noise,
    decide_admission,
    noise_from_stats,
    relative_value,
    yardstick_groups,
)
from pretrain.experiments.basis import (
    BasisConfig,
    BasisStats,
    build_basis,
    clip_document,
    validation_ids,
)
from pretrain.experiments.config import (
    PROXY_RECIPES,
    DataVariant,
    ExperimentSpec,
    check_anneal_recipes,
    experiment_name,
)
from pretrain.experiments.decisions import (
    excluded_groups,
    latest_review,
    read_decisions,
    record_review,
)
from pretrain.experiments.pools import PoolInfo
from pretrain.experiments.run import ExperimentResult
from pretrain.experiments.search import (
    SearchConfig,
    SearchSpace,
    anchor_mixtures,
    fit_mixtures,
    propose,
    sample_mixtures,
    search_report,
    search_skip_reason,
    verify_proposal,
)
from pretrain.experiments.view import plan_view, write_view
from pretrain.filters.config import FilterConfig
from pretrain.packing import PackedSplit, read_packed_index
from tests.helpers.experiments import group_documents, sentences, synthetic_setup, write_group


def pool(group: str, source: str, sequences: int) -> PoolInfo:
    return PoolInfo(
        group=group, source=source, documents=sequences, excluded_documents=0,
        sequences=sequences, tokens=sequences * 64, seq_len=64, tokenizer_sha256="x", path="",
    )  # fmt: skip


POOLS = [pool("web-0000", "web", 600), pool("web-0001", "web", 200), pool("news-0000", "news", 200)]


# -- views --------------------------------------------------------------------------------------
def test_natural_weights_follow_the_pool_sizes() -> None:
    plan = plan_view(POOLS, weights=None, num_sequences=100, max_epochs=4.0)
    assert plan.rows == {"web-0000/web": 60, "web-0001/web": 20, "news-0000/news": 20}
    assert plan.shares(POOLS) == {"web": 0.8, "news": 0.2}


def test_weights_and_boosts_split_the_budget() -> None:
    plan = plan_view(
        POOLS, weights={"web": 0.5, "news": 0.5}, num_sequences=100, max_epochs=4.0,
        boost={"web-0001": 0.2},
    )  # fmt: skip
    assert plan.rows["web-0001/web"] == 20  # the boosted group first, then the rest by weight
    assert plan.rows["news-0000/news"] == 40 and plan.rows["web-0000/web"] == 40
    assert plan.num_sequences == 100


def test_epoch_caps_and_unknown_sources_are_refused() -> None:
    with pytest.raises(DataError, match="max_epochs"):
        plan_view(POOLS, weights={"news": 1.0}, num_sequences=1000, max_epochs=4.0)
    with pytest.raises(DataError, match="no token pool"):
        plan_view(POOLS, weights={"code": 1.0}, num_sequences=10, max_epochs=4.0)
    with pytest.raises(DataError, match="no token pool"):
        plan_view(POOLS, weights=None, num_sequences=10, max_epochs=4.0, boost={"x-0000": 0.5})


def test_a_view_reads_pool_rows_without_copying(tmp_path: Path) -> None:
    basis, pools = synthetic_setup(tmp_path)
    chosen = [*pools["alpha-0000"], *pools["beta-0000"]]
    beta = pools["beta-0000"][0].sequences
    plan = plan_view(chosen, weights={"beta": 1.0}, num_sequences=beta * 2 + 7, max_epochs=4.0)
    view = tmp_path / "view"
    write_view(plan, chosen, str(view))
    assert sorted(p.name for p in view.iterdir()) == ["_COMMITTED", "index.json"]  # no .bin
    rows = PackedSplit(read_packed_index(str(view)), "train").all_rows()
    source = PackedSplit(read_packed_index(pools["beta-0000"][0].path), "train").all_rows()
    assert len(rows) == beta * 2 + 7
    # every pool row twice (two epochs), then 7 more, and nothing that is not a pool row
    counts, pool_rows = Counter(map(tuple, rows.tolist())), set(map(tuple, source.tolist()))
    assert set(counts) == pool_rows and all(counts[r] >= 2 for r in pool_rows)
    assert sum(counts[r] - 2 for r in pool_rows) == 7


# -- the basis: the validation set every experiment is scored on ---------------------------------
def test_a_long_validation_document_is_scored_on_a_window(tmp_path: Path) -> None:
    text = "\n".join(f"line {i}: " + "word " * 20 for i in range(400))  # ~44,000 characters
    window = clip_document(text, 4096, 500_000)
    assert 3072 <= len(window) <= 4096 and window in text
    assert text[text.index(window) - 1] == "\n"  # it starts at a line
    assert clip_document(text, 4096, 500_000) == window != clip_document(text, 4096, 900_000)
    assert clip_document(text, 4096, 0).startswith("line 0:")
    assert clip_document("short", 4096, 7) == "short"
    # in the basis: each held-out document weighs at most val_doc_chars, and nothing else
    # changes (the same documents held out, the same tokenizer: pools stay valid)
    rng = random.Random(0)
    rows = group_documents("alpha", "clean", 1, docs=40)
    rows = [{**r, "text": sentences("alpha", rng, 200)} for r in rows]  # ~5,000 characters
    uri = write_group(tmp_path, "alpha-0000", rows)
    packed = {}
    for chars in (512, 8192):
        out = str(tmp_path / f"basis-{chars}")
        stats = build_basis([uri], out, BasisConfig(vocab_size=300, seq_len=64, val_fraction=0.2,
                                                    val_doc_chars=chars))  # fmt: skip
        # what the windows left out is counted (every document here is longer than 512)
        held = stats.sources["alpha"]
        assert stats.clipped == ({"alpha": held} if chars == 512 else {})
        assert (stats.clipped_chars.get("alpha", 0) > held * 3000) == (chars == 512)
        index = json.loads((Path(out) / "validation" / "index.json").read_text())
        packed[chars] = (index["split_tokens"]["val"]["tokenized"], index["tokenizer_sha256"],
                         validation_ids(out))  # fmt: skip
    held = len(packed[512][2])
    assert held >= 2 and packed[512][1:] == packed[8192][1:]
    assert packed[512][0] <= held * (512 + 2) < packed[8192][0]  # a token is at least a byte
    with pytest.raises(ConfigError, match="val_doc_chars"):
        BasisConfig(val_doc_chars=100)


def test_the_reserve_is_clean_data_no_pool_holds_and_never_a_groups_last(tmp_path: Path) -> None:
    """A quarter of each source's training documents is set aside (the reference arms'),
    kept out of every pool, never a group's last document of its source; a target of a kind
    with no reserve gives half its documents to one, and each yardstick is described."""
    from pretrain.experiments.basis import RESERVE_IDS, held_out_ids
    from pretrain.experiments.pools import read_pool
    from pretrain.experiments.yardsticks import TargetSet

    big = write_group(tmp_path, "alpha-0000", group_documents("alpha", "clean", 1, docs=80))
    small = write_group(tmp_path, "alpha-0001", group_documents("alpha", "clean", 2, docs=1))
    target = tmp_path / "beta.jsonl"
    target.write_text("".join(json.dumps({"text": sentences("beta", random.Random(i), 20)}) + "\n"
                              for i in range(40)))  # fmt: skip
    out = str(tmp_path / "basis")
    stats = build_basis(
        [big, small], out,
        BasisConfig(vocab_size=300, seq_len=64, val_fraction=0.1, val_docs_per_source=5,
                    targets=(TargetSet(name="clean_beta", uris=(str(target),), kind="beta"),)),
        shard_groups=("alpha-0000", "alpha-0001"),
    )  # fmt: skip
    reserved = set(pa.parquet.read_table(Path(out) / RESERVE_IDS)["id"].to_pylist())
    small_ids = set(pa.parquet.read_table(small)["id"].to_pylist())
    assert 15 <= len(reserved) <= 20 and not reserved & small_ids  # ~a quarter, none of its last
    assert reserved <= held_out_ids(out) and validation_ids(out) <= held_out_ids(out)
    reserve = {p.source: p.tokens for p in read_pool(str(Path(out) / "reserve"))}
    assert set(reserve) == {"alpha", "beta"} and stats.reserve == reserve  # beta: the target's
    assert stats.targets == {"clean_beta": "beta"} and stats.reserve_from == {
        "beta": ["clean_beta"]
    }
    assert 10 <= stats.yardsticks["target:clean_beta"]["documents"] <= 30  # the other half
    assert stats.warnings["target:clean_beta"][0].startswith("yardstick target:clean_beta holds")


def test_a_target_with_a_reference_share_tops_up_the_reserve_of_its_kind(tmp_path: Path) -> None:
    """A kind the corpus holds a (thin) reserve of takes a target's ``reference_share`` into
    it; a share of 1.0 gives all of it and is no yardstick; the shares are checked."""
    from pretrain.experiments.pools import read_pool
    from pretrain.experiments.yardsticks import TargetSet

    group = write_group(tmp_path, "alpha-0000", group_documents("alpha", "clean", 1, docs=60))
    more = tmp_path / "more_alpha.jsonl"
    more.write_text("".join(json.dumps({"text": sentences("alpha", random.Random(i), 20)}) + "\n"
                            for i in range(40)))  # fmt: skip

    def basis(*targets: TargetSet) -> tuple[BasisStats, dict[str, int]]:
        out = tmp_path / f"basis{len(list(tmp_path.glob('basis*')))}"
        stats = build_basis(
            [group], str(out),
            BasisConfig(vocab_size=300, seq_len=64, val_fraction=0.1, val_docs_per_source=5,
                        targets=targets),
        )  # fmt: skip
        return stats, {p.source: p.tokens for p in read_pool(str(out / "reserve"))}

    _, own = basis()
    judged, _ = basis(TargetSet(name="clean_alpha", uris=(str(more),), kind="alpha"))
    assert judged.yardsticks["target:clean_alpha"]["documents"] == 40  # default: none given
    all_of_it, topped = basis(
        TargetSet(name="more_alpha", uris=(str(more),), kind="alpha", reference_share=1.0)
    )
    assert topped["alpha"] > own["alpha"] and all_of_it.targets == {}
    assert "target:more_alpha" not in all_of_it.yardsticks
    quarter, some = basis(
        TargetSet(name="clean_alpha", uris=(str(more),), kind="alpha", reference_share=0.25)
    )
    assert own["alpha"] < some["alpha"] < topped["alpha"]
    assert quarter.reserve_from == {"alpha": ["clean_alpha"]} and judged.reserve_from == {}
    assert 20 <= quarter.yardsticks["target:clean_alpha"]["documents"] <= 38
    with pytest.raises(ConfigError, match="reference_share"):
        TargetSet(name="x", uris=("a",), kind="alpha", reference_share=1.5)
    with pytest.raises(ConfigError, match="needs a kind"):
        TargetSet(name="x", uris=("a",), reference_share=0.5)


# -- search -------------------------------------------------------------------------------------
SPACE = SearchSpace(
    sources=("books", "code", "news", "web"),
    natural=(0.1, 0.2, 0.2, 0.5),
    available_tokens=(100, 200, 200, 500),
    target_tokens=1000,
    max_epochs=(4.0, 4.0, 4.0, 1.0),
)


def test_candidates_are_mixtures_within_the_caps() -> None:
    candidates = sample_mixtures(SPACE, count=64, seed=3)
    weights = np.array([SPACE.vector(c) for c in candidates])
    assert len(candidates) == 64 and np.allclose(weights.sum(axis=1), 1.0)
    assert SPACE.within_caps(weights).all()
    assert (weights[:, 3] <= 0.5 + 1e-6).all()  # web: one epoch of 500 tokens in a 1000 run
    assert sample_mixtures(SPACE, count=64, seed=3) == candidates  # seeded
    assert np.ptp(weights, axis=0).min() > 0.2  # they explore


def test_candidates_are_distinct_experiments() -> None:
    """Two sources, one nearly all of the tokens: many draws round to the same weights; each
    candidate must still be its own experiment (the same weights would be the same name)."""
    space = SearchSpace(sources=("code", "license"), natural=(0.999, 0.001),
                        available_tokens=(99_900, 100), target_tokens=100_000,
                        max_epochs=(4.0, 4.0))  # fmt: skip
    candidates = sample_mixtures(space, count=6, seed=0)
    names = {experiment_name("mix", DataVariant(weights=c), 0, "proxy_tiny") for c in candidates}
    assert len(names) == 6


def test_a_fit_finds_what_the_proxies_measured() -> None:
    """A known target (best at books=0.4): held-out rank correlation is high and the proposal
    lands near the optimum; the linear baseline misses the curvature."""
    optimum = np.array([0.4, 0.2, 0.2, 0.2])
    candidates = sample_mixtures(SPACE, count=48, seed=0)
    weights = np.array([SPACE.vector(c) for c in candidates])
    rng = np.random.default_rng(0)
    targets = ((weights - optimum) ** 2).sum(axis=1) + rng.normal(0, 1e-3, len(weights))
    fit = fit_mixtures(SPACE.sources, weights, targets, seed=0)
    assert fit.heldout_spearman["lightgbm"] > 0.7
    assert fit.heldout_spearman["lightgbm"] > fit.heldout_spearman["linear"]
    assert fit.model == "lightgbm"  # the better held-out ranking proposes
    proposal = propose(fit, SPACE, seed=0, samples=20_000, top_k=50)
    assert proposal.predicted < proposal.predicted_natural
    proposed = SPACE.vector(proposal.weights)
    assert np.abs(proposed - optimum).sum() < np.abs(np.array(SPACE.natural) - optimum).sum()
    # a run so large that almost no mixture fits its caps: an error, not an endless draw
    tight = dataclasses.replace(SPACE, target_tokens=SPACE.target_tokens * 3)
    with pytest.raises(DataError, match="respect the epoch caps"):
        propose(fit, tight, seed=0, samples=20_000, top_k=50, max_draws=50_000)


def test_a_linear_target_is_proposed_by_the_linear_fit() -> None:
    """Few proxies, a target linear in the weights (each source's share lowers it by its own
    rate): the linear fit ranks held-out proxies better, so it proposes, and it reaches past
    the candidates toward the best corner the caps allow."""
    candidates = sample_mixtures(SPACE, count=10, seed=3)
    weights = np.array([SPACE.vector(c) for c in candidates])
    rates = np.array([0.1, 0.4, 0.9, 0.2])
    targets = 3.0 - weights @ rates + np.random.default_rng(0).normal(0, 1e-4, len(weights))
    fit = fit_mixtures(SPACE.sources, weights, targets, seed=0)
    assert fit.model == "linear", fit.heldout_spearman
    proposal = propose(fit, SPACE, seed=0, samples=20_000, top_k=50)
    best_seen = min(targets)
    assert 3.0 - SPACE.vector(proposal.weights) @ rates < best_seen


def test_a_search_trains_its_anchors_and_keeps_the_best_unless_its_proposal_verifies() -> None:
    """Natural and uniform run beside the candidates. The regression's proposal stands only
    when its own proxies measure it better than every mixture measured before it; else the
    best of those (here uniform) is proposed."""
    anchors = anchor_mixtures(SPACE)
    assert anchors == {"natural": dict(zip(SPACE.sources, SPACE.natural, strict=True)),
                       "uniform": dict.fromkeys(SPACE.sources, 0.25)}  # fmt: skip
    one_epoch = dataclasses.replace(SPACE, max_epochs=(1.0, 1.0, 1.0, 1.0))
    assert list(anchor_mixtures(one_epoch)) == ["natural"]  # uniform's books need 2.5 epochs
    candidates = [*sample_mixtures(SPACE, count=10, seed=3), *anchors.values()]
    labels = [*(f"c{i:03d}" for i in range(10)), *anchors]
    targets = np.random.default_rng(1).normal(3.0, 0.01, len(candidates))
    targets[-1] = 2.9  # uniform measured best
    config = SearchConfig(candidates=10, top_k=50, proposal_samples=5000)
    report = search_report(SPACE, config, candidates, targets.tolist(), labels)
    assert report["anchors"]["uniform"] == 2.9 and report["best_candidate"]["label"] == "uniform"
    fitted = report["proposal"]
    assert (
        fitted["chosen_by"] == "regression" and fitted["weights"] == report["regression_proposal"]
    )
    kept = verify_proposal(report, 2.95)["proposal"]
    assert kept["chosen_by"] == "measured" and kept["weights"] == anchors["uniform"]
    assert "uniform is proposed instead" in kept["reason"]
    stands = verify_proposal(report, 2.85)["proposal"]
    assert stands["chosen_by"] == "verified" and stands["weights"] == report["regression_proposal"]
    assert stands["measured"] == 2.85 and report["proposal"] == fitted  # not changed in place
    with pytest.raises(ConfigError, match="anchors"):
        SearchConfig(anchors=("best",))


def test_search_settings_are_checked_and_named() -> None:
    assert SearchConfig().search_id() == SearchConfig(target="task_likelihood").search_id()
    assert SearchConfig().search_id() != SearchConfig(seed=1).search_id()
    assert SearchConfig().search_id() != SearchConfig(anchors=()).search_id()
    with pytest.raises(ConfigError, match=">= 6"):
        SearchConfig(candidates=3)
    with pytest.raises(ConfigError, match="target"):
        SearchConfig(target="accuracy")
    with pytest.raises(DataError, match="epoch caps"):
        sample_mixtures(
            SearchSpace(sources=("a", "b"), natural=(0.5, 0.5), available_tokens=(1, 1),
                        target_tokens=10**6, max_epochs=(1.0, 1.0)),
            count=6, max_draws=10_000,
        )  # fmt: skip


def test_a_search_over_one_source_is_skipped_with_the_reason() -> None:
    """One source (the issue-44 case: a team's own crawl), no data, or a target naming a source
    the corpus lacks: the search cannot run, and the reason says which; otherwise it can."""
    one = search_skip_reason({"web": 47_616})
    assert one == (
        "the corpus has one source, 'web': a mixture of one source has nothing to decide"
    )
    assert search_skip_reason({"web": 47_616, "code": 0}) == one  # an empty source weighs nothing
    assert (
        search_skip_reason({})
        == search_skip_reason({"web": 0})
        == ("no source of the corpus holds any data")
    )
    assert search_skip_reason({"web": 10, "news": 3}) is None
    assert search_skip_reason({"web": 10, "news": 3}, SearchConfig(target="bpb:web")) is None
    assert search_skip_reason({"web": 10, "news": 3}, SearchConfig(target="bpb:code")) == (
        "the target bpb:code names no source of the corpus (it has news, web)"
    )
    with pytest.raises(DataError, match="cannot run: the corpus has one source, 'web'"):
        SearchSpace.from_pools([pool("web-0000", "web", 600), pool("web-0001", "web", 10)])
    assert SearchSpace.from_pools(POOLS).sources == ("news", "web")


# -- admission ----------------------------------------------------------------------------------
def evidence(
    group: tuple[float, ...],
    floor: tuple[float, ...] = (0.00, 0.002, -0.002),
    reference: tuple[float, ...] | None = (-0.050, -0.052, -0.048),
    key: str = "mean",
) -> AdmissionEvidence:
    """Evidence with each arm's per-seed change on one yardstick (lower is better)."""
    changes = {"with": {key: group}, "floor": {key: floor}}
    if reference is not None:
        changes["reference"] = {key: reference}
    return AdmissionEvidence(
        group="g", seeds=tuple(range(len(group))), changes=changes, experiments={},
        proxy_flops=1.0, proxy_seconds=1.0, kind="web",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("group", "expected", "why"),
    [
        ((-0.048, -0.050, -0.046), "admit", "worth at least admit_at"),  # about the reference
        ((-0.002, 0.000, 0.003), "reject", "worth at most reject_at"),  # about the floor
        ((0.010, 0.012, 0.011), "reject", "worth at most reject_at"),  # worse than its floor
        ((-0.025, -0.022, -0.026), "hold", "review it"),  # half way
        ((-0.05, 0.0, -0.03), "hold", "review it"),  # its band spans both thresholds
    ],
)
def test_relative_value_decides(group: tuple[float, ...], expected: str, why: str) -> None:
    decision = decide_admission(evidence(group), noise=None, cost=None, policy=AdmissionPolicy())
    assert decision.decision == expected and why in decision.reason, decision.reason
    value = decision.relative
    assert value is not None and not decision.cannot_see
    assert math.isclose(value.floor_change, 0.0, abs_tol=1e-12)
    assert math.isclose(value.reference_change, -0.05)
    assert "relative value" in decision.reason and "floor" in decision.reason


def test_a_group_between_its_floor_and_the_reference_is_placed_seed_by_seed() -> None:
    found = relative_value(evidence((-0.025, -0.026, -0.024)), "mean")
    assert found is not None
    assert math.isclose(
        found.value, np.mean([0.5, (0.002 + 0.026) / 0.054, (-0.002 + 0.024) / 0.046])
    )
    assert found.spread > 0 and math.isclose(found.separation, 0.05)
    assert relative_value(evidence((-0.02,) * 3, reference=None), "mean") is None


def test_when_the_floor_is_the_reference_the_proxies_cannot_see() -> None:
    """Damaged text that lowers validation loss as much as clean text: no verdict but "cannot
    see", with the recipe to try next; an absolute gain alone no longer admits."""
    blind = evidence((-0.030, -0.031, -0.029), floor=(-0.030, -0.028, -0.033),
                     reference=(-0.031, -0.029, -0.032))  # fmt: skip
    decision = decide_admission(blind, noise=None, cost=None, policy=AdmissionPolicy(),
                                next_recipe="proxy_cpu_anneal_2x")  # fmt: skip
    assert decision.decision == "hold" and decision.cannot_see
    assert CANNOT_SEE in decision.reason and "try recipe proxy_cpu_anneal_2x" in decision.reason
    assert decision.next_recipe == "proxy_cpu_anneal_2x"
    # apart by less than min_separation: blind too, however small the spread
    close = evidence((-0.0010,) * 3, floor=(0.0,) * 3, reference=(-0.0015, -0.0015, -0.0016))
    assert decide_admission(close, noise=None, cost=None, policy=AdmissionPolicy()).cannot_see


def test_a_reference_that_reads_a_thin_reserve_over_and_over_is_warned_about() -> None:
    """How often the reference arm reads its reserve comes from its runs (the boost share of
    the tokens it trained on) and the reserve's size; over MAX_REFERENCE_EPOCHS the decision
    warns and names the remedy."""

    def run(name: str, seed: int, boost: dict[str, float]) -> ExperimentResult:
        return ExperimentResult(
            name=name, spec={"seed": seed, "variant": {"boost": boost}}, shares={}, rows={},
            loss={}, bits_per_byte={"web": 3.0}, tasks={},
            cost={"flops": 1.0, "wall_s": 1.0, "tokens": 400_000.0}, targets={},
        )  # fmt: skip

    arms = {arm: [run(f"{arm}{s}", s, boost) for s in (0, 1)]
            for arm, boost in (("with", {"web-0001": 0.25}), ("without", {}),
                               ("floor", {"floor:web-0001": 0.25}),
                               ("reference", {"reserve:web": 0.25}))}  # fmt: skip

    def found(reserve_tokens: int | None) -> AdmissionEvidence:
        return admission_evidence(
            group="web-0001", with_runs=arms["with"], without_runs=arms["without"],
            floor_runs=arms["floor"], reference_runs=arms["reference"], kind="web",
            reserve_tokens=reserve_tokens,
        )  # fmt: skip

    thin = found(40_000)
    assert thin.reference_epochs is not None and math.isclose(thin.reference_epochs, 2.5)
    assert "40,000-token reserve of web 2.5 times over" in thin.reference_warnings()[0]
    assert "reference_share" in thin.reference_warnings()[0]
    assert found(100_000).reference_warnings() == []  # once: fresh tokens
    assert found(None).reference_epochs is None and found(None).reference_warnings() == []
    decided = dataclasses.replace(evidence((-0.05,) * 3), reserve_tokens=40_000,
                                  reference_epochs=2.5)  # fmt: skip
    warned = decide_admission(decided, noise=None, cost=None, policy=AdmissionPolicy())
    assert any("2.5 times over" in w for w in warned.warnings)
    # a reference that holds part of the yardstick it is judged on is warned about
    mixed = dataclasses.replace(evidence((-0.05,) * 3), reference_from=("clean_web",))
    assert (
        "part of the reference is target clean_web"
        in mixed.reference_warnings("target:clean_web")[0]
    )
    assert mixed.reference_warnings("target:forum") == [] and mixed.reference_warnings() == []


def test_no_reference_of_its_kind_holds_the_group_for_review() -> None:
    decision = decide_admission(
        evidence((-0.05,) * 3, reference=None), noise=None, cost=None, policy=AdmissionPolicy()
    )
    assert decision.decision == "hold" and "no clean data of its kind (web)" in decision.reason
    assert decision.relative is None and not decision.cannot_see


def test_the_yardstick_is_the_target_of_the_groups_kind_else_its_own_source() -> None:
    def result(name: str, seed: int, bpb: dict[str, float], targets: dict[str, float]):
        return ExperimentResult(
            name=name, spec={"seed": seed}, shares={}, rows={}, loss={}, bits_per_byte=bpb,
            tasks={}, cost={"flops": 1.0, "wall_s": 1.0}, targets=targets,
        )  # fmt: skip

    base = {"code": 2.3, "web": 3.8}
    arms = {
        arm: [result(f"{arm}{s}", s, {k: v + d for k, v in base.items()},
                     {"clean_web": 3.5 + t, "forum": 4.0}) for s in (0, 1, 2)]
        for arm, d, t in (("with", -0.02, -0.04), ("without", 0, 0), ("floor", -0.02, 0.0),
                          ("reference", -0.02, -0.05))
    }  # fmt: skip
    evidence = admission_evidence(
        group="web-0007", with_runs=arms["with"], without_runs=arms["without"],
        floor_runs=arms["floor"], reference_runs=arms["reference"], sources={"web"},
        kind="web", targets={"clean_web": "web", "forum": None},
    )  # fmt: skip
    assert evidence.yardstick("own_source") == "target:clean_web"
    assert evidence.yardstick("mean") == "mean" and evidence.yardstick("bpb:code") == "code"
    assert evidence.yardstick("target:forum") == "target:forum"
    with pytest.raises(DataError, match="no yardstick"):
        evidence.yardstick("target:nosuch")
    decision = decide_admission(evidence, noise=None, cost=None, policy=AdmissionPolicy())
    assert decision.yardstick == "target:clean_web" and decision.decision == "admit", (
        decision.reason
    )
    # on the held-out web documents the floor helps as much as the reference: blind there
    own = decide_admission(evidence, noise=None, cost=None,
                           policy=AdmissionPolicy(judge="bpb:web"))  # fmt: skip
    assert own.yardstick == "web" and own.cannot_see
    no_target = dataclasses.replace(evidence, targets={})
    assert no_target.yardstick("own_source") == "own"
    with pytest.raises(ConfigError, match="judge"):
        AdmissionPolicy(judge="median")
    with pytest.raises(ConfigError, match="reject_at"):
        AdmissionPolicy(admit_at=0.3, reject_at=0.6)


def test_a_group_of_mixed_languages_judged_on_one_language_is_warned_about() -> None:
    stats = {"documents": 400, "chars": 900_000, "languages": {"en": 1.0}}
    found = dataclasses.replace(
        evidence((-0.01,) * 3, key="target:clean_web"),
        yardsticks={"target:clean_web": stats}, language="en", language_share=0.49,
    )  # fmt: skip
    warned = found.warnings("target:clean_web")
    assert len(warned) == 1 and warned[0].startswith("the group is 49% en and yardstick")
    assert dataclasses.replace(found, language_share=0.9).warnings("target:clean_web") == []
    mixed = {"target:clean_web": {**stats, "languages": {"en": 0.6, "es": 0.4}}}
    assert dataclasses.replace(found, yardsticks=mixed).warnings("target:clean_web") == []


def test_a_yardstick_too_small_or_in_another_language_is_warned_about() -> None:
    stats = {"documents": 21, "chars": 80_000, "languages": {"en": 0.48, "cs": 0.52},
             "warnings": ["yardstick web holds 21 documents (under 300): too few"]}  # fmt: skip
    found = dataclasses.replace(
        evidence((-0.05,) * 3, key="web"), yardsticks={"web": stats}, language="en"
    )
    warnings = found.warnings("web")
    assert any("21 documents" in w for w in warnings)
    assert any("48% en" in w and "too mixed" in w for w in warnings)
    decision = decide_admission(found, noise=None, cost=None,
                                policy=AdmissionPolicy(judge="bpb:web"))  # fmt: skip
    assert decision.warnings == tuple(warnings)
    english = {**stats, "languages": {"en": 0.97}, "warnings": []}
    assert dataclasses.replace(found, yardsticks={"web": english}).warnings("web") == []


def test_a_valuable_but_noisy_group_is_held() -> None:
    noisy = NoiseRisk(
        documents=100, rejected_share=0.7, duplicate_share=0.1, toxic_share=0.0, pii_share=0.0
    )
    toxic = NoiseRisk(
        documents=100, rejected_share=0.1, duplicate_share=0.0, toxic_share=0.2, pii_share=0.0
    )
    clean_corpus = corpus_noise([
        NoiseRisk(documents=300, rejected_share=0.2, duplicate_share=0.05, toxic_share=0.01,
                  pii_share=0.1),
        NoiseRisk(documents=100, rejected_share=0.4, duplicate_share=0.2, toxic_share=0.0,
                  pii_share=0.0),
    ])  # fmt: skip
    assert clean_corpus is not None and clean_corpus.documents == 400
    assert math.isclose(clean_corpus.rejected_share, 0.25)  # weighted by documents
    assert math.isclose(clean_corpus.duplicate_share, (240 * 0.05 + 60 * 0.2) / 300)  # by kept
    good = evidence((-0.048, -0.050, -0.046))
    for noise, word in ((noisy, "more than of the admitted corpus"), (toxic, "toxic")):
        decision = decide_admission(good, noise=noise, cost=None, policy=AdmissionPolicy(),
                                    corpus=clean_corpus)  # fmt: skip
        assert decision.decision == "hold" and word in decision.reason, decision.reason
        assert decision.to_dict()["corpus_noise"]["risk"] == clean_corpus.risk
    # a web group that loses as much to cleaning as the admitted web did is admitted
    web_corpus = corpus_noise([dataclasses.replace(noisy, documents=500)])
    admitted = decide_admission(good, noise=noisy, cost=None, policy=AdmissionPolicy(),
                                corpus=web_corpus)  # fmt: skip
    assert admitted.decision == "admit", admitted.reason
    # past max_noise_risk it is held whatever the corpus lost
    garbage = dataclasses.replace(noisy, rejected_share=0.95)
    held = decide_admission(good, noise=garbage, cost=None, policy=AdmissionPolicy(),
                            corpus=corpus_noise([garbage]))  # fmt: skip
    assert held.decision == "hold" and "max_noise_risk" in held.reason
    assert corpus_noise([]) is None
    # the yardstick: the admitted groups that share a source, else all of them
    sources = {"web-0000": {"web"}, "code-0000": {"code"}, "mix-0000": {"web", "wiki"},
               "web-0007": {"web"}, "forum-0001": {"forum"}}  # fmt: skip
    admitted_groups = ["code-0000", "mix-0000", "web-0000"]
    assert yardstick_groups("web-0007", sources, admitted_groups) == ["mix-0000", "web-0000"]
    assert yardstick_groups("forum-0001", sources, admitted_groups) == admitted_groups
    one_seed = decide_admission(
        evidence((-0.05,), floor=(0.0,), reference=(-0.05,)), noise=None, cost=None,
        policy=AdmissionPolicy(),
    )  # fmt: skip
    assert one_seed.decision == "hold" and "policy needs 2" in one_seed.reason
    with pytest.raises(ConfigError, match="2 seeds"):
        AdmissionPolicy(min_seeds=1)


def test_noise_and_cost_from_the_stage_records(tmp_path: Path) -> None:
    noise = noise_from_stats(
        {"documents_in": 200, "kept": 150, "dropped": {"toxic_content": 10, "too_short": 40},
         "documents_with_pii": 15},
        {"documents_in": 150, "removed": {"near_duplicate": 30}},
    )  # fmt: skip
    assert (noise.rejected_share, noise.toxic_share, noise.duplicate_share) == (0.25, 0.05, 0.2)
    assert noise.pii_share == 0.1 and math.isclose(noise.risk, 1 - 0.75 * 0.8)
    cost = CleaningCost(cpu_seconds=10.0, raw_bytes_processed=10**8, raw_bytes_total=4 * 10**8)
    assert cost.cpu_seconds_full == 40.0 and cost.cpu_seconds_per_gb == 100.0


def test_decisions_and_reviews_are_stored(tmp_path: Path) -> None:
    from pretrain import storage

    root = str(tmp_path / "data_admission")
    for group, decision in (("a-0000", "admit"), ("b-0000", "hold"), ("c-0000", "reject")):
        storage.write_json({"group": group, "decision": decision}, f"{root}/{group}/decision.json")
    decisions = read_decisions(root)
    assert excluded_groups(decisions, include_held=False) == ["b-0000", "c-0000"]
    assert excluded_groups(decisions, include_held=True) == ["c-0000"]
    reviews = str(tmp_path / "reviews")
    review = AdmissionReview(decision="admit", reviewer="ana", reason="news we need")
    first = record_review(reviews, "c-0000", review, run_id="r1", at="20260101T000000Z")
    assert record_review(reviews, "c-0000", review, run_id="r1", at="later") == first  # a retry
    later = AdmissionReview(decision="reject", reviewer="bo", reason="spam after all")
    record_review(reviews, "c-0000", later, run_id="r2", at="20260102T000000Z")
    assert latest_review(reviews, "c-0000")["reviewer"] == "bo"
    with pytest.raises(ConfigError, match="who and why"):
        AdmissionReview(decision="admit", reviewer=" ", reason="x")


# -- registry, specs, ablation settings ---------------------------------------------------------
def test_specs_are_named_by_their_settings(tmp_path: Path) -> None:
    with_, without, floor, reference = registry.admission_specs(
        "web-0007", recipe="proxy_cpu", seeds=(0, 1), probe_share=0.25, kind="web"
    )
    again = registry.admission_specs(
        "web-0007", recipe="proxy_cpu", seeds=(0, 1), probe_share=0.25, kind="web"
    )
    assert [s.name for s in with_] == [s.name for s in again.with_]
    on_gpu = registry.admission_specs(
        "web-0007", recipe="proxy_gpu_20m", seeds=(0, 1), probe_share=0.25
    ).with_
    assert not {s.name for s in on_gpu} & {s.name for s in with_}  # another experiment
    assert {s.label for s in with_} == {"with"} and {s.label for s in without} == {"base"}
    assert all(s.group == "" for s in without)  # the base arm is shared by every group
    assert [s.variant.include_groups for s in floor] == [("floor:web-0007",)] * 2
    assert [s.variant.boost for s in reference] == [{"reserve:web": 0.25}] * 2
    news = registry.admission_specs(
        "web-0009", recipe="proxy_cpu", seeds=(0, 1), probe_share=0.25, kind="web"
    )
    assert [s.name for s in news.reference] == [s.name for s in reference]  # shared by kind
    assert [s.name for s in news.floor] != [s.name for s in floor]  # the group's own
    assert (
        registry.admission_specs(
            "web-0007", recipe="proxy_cpu", seeds=(0,), probe_share=0.25
        ).reference
        == []
    )  # no kind: no reference arm
    root = str(tmp_path)
    assert registry.register(root, with_[0]) is True
    assert registry.register(root, with_[0]) is False
    clash = ExperimentSpec(name=with_[0].name, variant=DataVariant(weights={"web": 1.0}))
    with pytest.raises(ConfigError, match="other settings"):
        registry.register(root, clash)
    assert [s.name for s in registry.list_specs(root)] == [with_[0].name]
    with pytest.raises(ConfigError, match="partition key"):
        ExperimentSpec(name="Bad Name", variant=DataVariant())
    with pytest.raises(ConfigError, match="unknown proxy recipe"):
        ExperimentSpec(name="ok", variant=DataVariant(), recipe="gpt5")


def test_anneal_arms_of_a_seed_continue_one_shared_proxy() -> None:
    with_, without, floor, reference = registry.admission_specs(
        "web-0007", recipe="proxy_cpu_anneal", seeds=(0, 1), probe_share=0.25, kind="web"
    )
    starts = registry.starts_of("proxy_cpu_anneal", (0, 1))
    assert [s.recipe for s in starts] == ["proxy_cpu_admit"] * 2
    assert [s.seed for s in starts] == [0, 1] and {s.label for s in starts} == {"start"}
    assert starts[0].variant == DataVariant() and starts[0].base == ""  # the corpus, from scratch
    for arms in (with_, without, floor, reference):
        assert [a.base for a in arms] == [s.name for s in starts]  # seed s continues start s
    # every group's admission shares the starts and the without arm
    other_with, other_without, _, _ = registry.admission_specs(
        "news-0009", recipe="proxy_cpu_anneal", seeds=(0, 1), probe_share=0.25
    )
    assert [s.name for s in other_without] == [s.name for s in without]
    assert other_with[0].base == with_[0].base and other_with[0].name != with_[0].name
    assert with_[0].settings()["base"] == starts[0].name  # part of the identity
    assert registry.starts_of("proxy_cpu", (0, 1)) == []  # trained from scratch: no start
    # a search's candidates continue the same start (the same base recipe and seed)
    candidates = registry.search_specs("search-x", [{"web": 1.0}, {"web": 0.5, "news": 0.5}],
                                       recipe="proxy_cpu_mix_anneal", seeds=(0,))  # fmt: skip
    assert [c.base for c in candidates] == [starts[0].name] * 2
    assert starts[0].kind == "start"
    with pytest.raises(ConfigError, match="name it as base"):
        ExperimentSpec(name="x-s0", variant=DataVariant(), recipe="proxy_cpu_anneal")
    with pytest.raises(ConfigError, match="takes no base"):
        ExperimentSpec(name="x-s0", variant=DataVariant(), recipe="proxy_cpu", base="y-s0")
    wider = dataclasses.replace(PROXY_RECIPES["proxy_cpu_anneal"], model="proxy_128x2")
    with pytest.raises(ConfigError, match="model shapes"):
        check_anneal_recipes({**PROXY_RECIPES, wider.name: wider})
    orphan = dataclasses.replace(wider, starts_from="proxy_cpu_anneal")
    with pytest.raises(ConfigError, match="not a recipe trained from scratch"):
        check_anneal_recipes({**PROXY_RECIPES, orphan.name: orphan})


def test_an_anneal_needs_its_base_result(tmp_path: Path) -> None:
    from pretrain.experiments.run import run_experiment

    basis, pools = synthetic_setup(tmp_path)
    [spec] = registry.admission_specs(
        "beta-0001", recipe="proxy_tiny_anneal", seeds=(0,), probe_share=0.3
    ).with_
    with pytest.raises(DataError, match="run start-"):
        run_experiment(
            spec, [p for g in ("alpha-0000", "beta-0000", "beta-0001") for p in pools[g]],
            val_packed_dir=f"{basis}/validation", tokenizer_uri=f"{basis}/tokenizer",
            out_dir=str(tmp_path / "out"),
        )  # fmt: skip


def test_a_retuned_recipe_is_another_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ExperimentSpec(name="mix-x-s0", variant=DataVariant(), recipe="proxy_tiny")
    before = spec.settings()
    retuned = dataclasses.replace(
        PROXY_RECIPES["proxy_tiny"], lr=PROXY_RECIPES["proxy_tiny"].lr / 2
    )
    monkeypatch.setitem(PROXY_RECIPES, "proxy_tiny", retuned)
    assert spec.settings() != before  # proxy_runs' identity: the old result is not reused
    assert spec.settings()["recipe_settings"]["lr"] == retuned.lr


def test_filter_overrides_apply_to_nested_sections() -> None:
    base = FilterConfig()
    changed = with_overrides(base, {"toxicity": None, "langid": {"min_score": 0.9}})
    assert changed.toxicity is None and changed.langid.min_score == 0.9
    assert changed.gopher_quality == base.gopher_quality
    with pytest.raises(ConfigError, match="no setting"):
        with_overrides(base, {"min_qualty": 0.5})


def _english(rng: random.Random, sentences: int) -> str:
    subjects = ["The committee", "A member of the board", "The mayor of the town", "Our team"]
    verbs = ["said that it will review", "wanted to have", "agreed to fund", "will talk about"]
    objects = ["the budget of the school", "a plan for the new road", "the report and the data",
               "the cost of the project"]  # fmt: skip
    return " ".join(
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} in {1990 + i}."
        for i in range(sentences)
    )


def test_an_ablation_arm_refilters_a_group_into_its_own_pool(tmp_path: Path) -> None:
    """Two arms over the same raw documents: a base filter (without Gopher's repetition rules,
    which templated text fails) and one whose Gopher word minimum drops the short half. The
    duplicates the campaign removed stay out of both."""
    from pretrain import storage
    from pretrain.data.schema import doc_id, documents_table
    from pretrain.experiments.ablation import filtered_pool

    basis, _ = synthetic_setup(tmp_path)
    rng = random.Random(0)
    texts = [_english(rng, 30) for _ in range(40)] + [_english(rng, 8) for _ in range(40)]
    docs = [{"id": doc_id(t), "text": t, "source": "web"} for t in texts]
    raw = str(tmp_path / "raw.parquet")
    storage.write_table(documents_table(docs), raw)
    duplicate = frozenset({docs[0]["id"]})
    base = {"gopher_repetition": None}
    strict = {**base, "gopher_quality": {"min_doc_words": 150}}
    arms = {}
    for name, overrides in (("campaign", base), ("strict", strict)):
        arms[name] = filtered_pool(
            raw, with_overrides(FilterConfig(), overrides), tokenizer_uri=f"{basis}/tokenizer",
            out_dir=str(tmp_path / name), group="web-0009", seq_len=64,
            duplicate_ids=duplicate,
        )  # fmt: skip
    (campaign, campaign_stats), (strict_pools, strict_stats) = arms["campaign"], arms["strict"]
    assert campaign_stats["kept"] == 80 and strict_stats["kept"] == 40  # each arm's funnel
    assert campaign[0].documents == 79 and strict_pools[0].documents == 39  # the duplicate out
    assert strict_pools[0].sequences < campaign[0].sequences
