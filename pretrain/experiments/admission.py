"""Admission of a new shard group: what proxies with and without it say, what cleaning it cost,
and a policy that turns both into admit, hold for review, or reject.

    evidence = admission_evidence(group="forum-0007", with_runs=[r0, r1], without_runs=[b0, b1],
                                  sources={"web"})
    evidence.delta_bpb          # {"news": -0.004, "web": +0.031, ..., "mean": +0.012, "own": +0.031}
    decision = decide_admission(evidence, noise=NoiseRisk(...), cost=CleaningCost(...),
                                policy=AdmissionPolicy(), corpus=corpus_noise([...]))
    decision.decision           # "reject"
    decision.reason             # "adding it changes its own source's (web) validation bits ..."

A change counts only when it is larger than ``spread_factor`` times its spread over seeds
(the seeds are paired: seed ``s`` with the group against seed ``s`` without it). The noise risk
is what the stages found in the group (shares rejected, duplicate, toxic, masked for PII),
judged against what they found in the admitted corpus's groups; the cleaning cost is the CPU time the stages spent on it, per GB and for the whole group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pretrain.errors import ConfigError, DataError
from pretrain.experiments.run import ExperimentResult
from pretrain.settings import check_types

DECISIONS = ("admit", "hold", "reject")
JUDGES = ("mean", "own_source")


@dataclass(frozen=True, kw_only=True)
class AdmissionPolicy:
    """Thresholds, in validation bits per byte of the group's own sources (``judge=
    "own_source"``, the default) or averaged over every source (``judge="mean"``); lower is
    better.

    ``min_gain``: admit only when the group lowers it at least this much; ``max_harm``: reject
    when it raises it at least this much; between the two, or when the change is within
    ``spread_factor`` × its seed spread, hold for review. A group whose change is conclusively
    small (the whole band Δ ± ``spread_factor`` × spread lies between ``-min_gain`` and
    ``max_harm``) adds nothing the proxies can measure while every token of it displaces
    admitted data: ``no_gain`` says whether it is rejected (default) or held for review. A
    group that helps is held too when
    its toxic share exceeds ``max_toxic_share``, when cleaning removed more of it than
    ``max_noise_risk``, or when it removed more than the admitted groups of the same sources
    lost plus ``max_excess_noise`` (their funnel is the yardstick, :func:`yardstick_groups`:
    web crawls lose most of their pages to cleaning and code almost none, so a fixed share
    alone would hold every web group)."""

    min_gain: float = 0.002  # admit only when the group lowers bits per byte at least this much
    max_harm: float = 0.002  # reject when it raises bits per byte at least this much
    spread_factor: float = 1.0  # a change within this many seed spreads is held as inconclusive
    min_seeds: int = 2  # fewer paired seeds than this: held (no spread can be measured)
    max_noise_risk: float = 0.9  # a helpful group that cleaning cut by more than this: held
    max_excess_noise: float = 0.2  # held when cleaning cut it this much more than its peers
    max_toxic_share: float = 0.05  # a helpful group with a larger toxic share: held
    no_gain: str = "reject"  # "reject" or "hold": a change conclusively within both thresholds
    # "own_source" (default): the change on the group's own sources only -- is it good data for
    # what it is? The mixture (weights searched or configured) decides how much of each source
    # to take. "mean": the change averaged over every validation source, which also counts what
    # the probe share displaces from the others (a mixture question: at 25% every clean group
    # costs the other sources +0.01-0.03 bits/byte). A group with no measured source: the mean.
    # bench/data_roi.py: own_source decides 7 of 7 planted groups right, mean 5 of 7.
    judge: str = "own_source"  # "own_source" or "mean": which change the thresholds read

    def __post_init__(self) -> None:
        check_types(self)
        if min(self.min_gain, self.max_harm, self.spread_factor) < 0:
            raise ConfigError("AdmissionPolicy: min_gain, max_harm, spread_factor must be >= 0")
        if self.min_seeds < 2:
            raise ConfigError(
                f"AdmissionPolicy.min_seeds={self.min_seeds}: at least 2 seeds, or no spread "
                "can be measured"
            )
        if self.judge not in JUDGES:
            raise ConfigError(f"AdmissionPolicy.judge={self.judge!r}: use one of {JUDGES}")
        if self.no_gain not in ("reject", "hold"):
            raise ConfigError(f"AdmissionPolicy.no_gain={self.no_gain!r}: use 'reject' or 'hold'")
        for name in ("max_noise_risk", "max_excess_noise", "max_toxic_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"AdmissionPolicy.{name} must be a share in [0, 1]")


@dataclass(frozen=True, kw_only=True)
class AdmissionReview:
    """An operator's override of a group's decision, recorded with who and why."""

    decision: str  # admit, hold or reject: it replaces the policy's decision
    reviewer: str  # who decided (recorded with the decision)
    reason: str  # why (recorded with the decision)

    def __post_init__(self) -> None:
        check_types(self)
        if self.decision not in DECISIONS:
            raise ConfigError(f"AdmissionReview.decision={self.decision!r}: use one of {DECISIONS}")
        if not self.reviewer.strip() or not self.reason.strip():
            raise ConfigError("AdmissionReview needs a reviewer and a reason (who and why)")


@dataclass(frozen=True, kw_only=True)
class AdmissionConfig:
    """How a new shard group is tried and decided: the proxy, the seeds, the share of the
    budget the group takes in the "with" arm, the policy, and an operator's override."""

    # anneals of one shared proxy per seed: the arms of a seed differ by their data alone
    # (from scratch, proxy_cpu_admit's seed spread of 0.04-0.1 bits/byte hid most groups)
    recipe: str = "proxy_cpu_anneal"  # the proxy recipe of both arms (an anneal of a start)
    seeds: tuple[int, ...] = (0, 1)  # one pair of arms per seed (at least policy.min_seeds)
    probe_share: float = 0.25  # share of the proxy budget the new group takes when added
    policy: AdmissionPolicy = AdmissionPolicy()  # the thresholds that decide
    review: AdmissionReview | None = None  # the operator's decision (recorded; it then holds)

    def __post_init__(self) -> None:
        check_types(self)
        if not 0.0 < self.probe_share < 1.0:
            raise ConfigError(f"AdmissionConfig.probe_share={self.probe_share}: use (0, 1)")
        if any(seed < 0 for seed in self.seeds):
            raise ConfigError(f"AdmissionConfig.seeds={self.seeds}: use seeds >= 0")
        if len(set(self.seeds)) < self.policy.min_seeds:
            raise ConfigError(
                f"AdmissionConfig.seeds={self.seeds}: the policy needs {self.policy.min_seeds} "
                "distinct seeds"
            )


@dataclass(frozen=True, kw_only=True)
class AdmissionEvidence:
    group: str
    seeds: tuple[int, ...]
    delta_bpb: dict[str, float]  # source, "mean" (and "own") -> mean paired change, with - without
    spread_bpb: dict[str, float]  # the same keys -> std over seeds of that change
    with_experiments: tuple[str, ...]
    without_experiments: tuple[str, ...]
    proxy_flops: float
    proxy_seconds: float
    own_sources: tuple[str, ...] = ()  # the group's sources the validation set measures ("own")


@dataclass(frozen=True, kw_only=True)
class NoiseRisk:
    """What the stages found in the group (shares of its raw documents unless said)."""

    documents: int
    rejected_share: float
    duplicate_share: float  # of the documents the filter kept
    toxic_share: float
    pii_share: float  # of the documents the filter kept: PII masked in them

    @property
    def risk(self) -> float:
        """Share of the raw documents cleaning removed (rejected or duplicate)."""
        return 1.0 - (1.0 - self.rejected_share) * (1.0 - self.duplicate_share)


def yardstick_groups(
    group: str, sources: Mapping[str, set[str]], admitted: Sequence[str]
) -> list[str]:
    """The admitted groups whose funnel a new ``group`` is judged against: those that share a
    source with it (one crawl is cleaned alike: web loses most pages, code almost none), else
    every admitted group. ``sources``: group -> the sources its documents come from."""
    mine = sources.get(group, set())
    peers = [g for g in admitted if g != group and sources.get(g, set()) & mine]
    return peers or [g for g in admitted if g != group]


def corpus_noise(groups: Sequence[NoiseRisk]) -> NoiseRisk | None:
    """The admitted corpus's funnel: its groups' shares weighted by their documents (None
    when no group has stats)."""
    total = sum(g.documents for g in groups)
    if not total:
        return None

    def mean(field: str, weight: Callable[[NoiseRisk], float]) -> float:
        weights = [weight(g) for g in groups]
        return sum(getattr(g, field) * w for g, w in zip(groups, weights, strict=True)) / max(
            1e-12, sum(weights)
        )

    kept = lambda g: g.documents * (1.0 - g.rejected_share)  # noqa: E731
    return NoiseRisk(
        documents=total,
        rejected_share=mean("rejected_share", lambda g: g.documents),
        duplicate_share=mean("duplicate_share", kept),
        toxic_share=mean("toxic_share", lambda g: g.documents),
        pii_share=mean("pii_share", kept),
    )


def noise_from_stats(filter_stats: dict[str, Any], dedup_stats: dict[str, Any]) -> NoiseRisk:
    """The group's noise risk from its ``filtered_shards`` and ``deduped_shards`` stats.json."""
    documents = int(filter_stats["documents_in"])
    dropped = dict(filter_stats.get("dropped", {}))
    kept = max(1, int(filter_stats["kept"]))
    with_pii = filter_stats.get("documents_with_pii")
    if with_pii is None:  # older stats: mask counts only; at most one document per mask
        with_pii = min(kept, sum(dict(filter_stats.get("pii_masked", {})).values()))
    removed = sum(dict(dedup_stats.get("removed", {})).values())
    return NoiseRisk(
        documents=documents,
        rejected_share=sum(dropped.values()) / max(1, documents),
        duplicate_share=removed / max(1, int(dedup_stats.get("documents_in", kept))),
        toxic_share=dropped.get("toxic_content", 0) / max(1, documents),
        pii_share=int(with_pii) / kept,
    )


@dataclass(frozen=True, kw_only=True)
class CleaningCost:
    cpu_seconds: float  # the stages' CPU time on the part of the group processed
    raw_bytes_processed: int
    raw_bytes_total: int  # the whole group (its manifest)

    @property
    def cpu_seconds_full(self) -> float:
        scale = self.raw_bytes_total / max(1, self.raw_bytes_processed)
        return self.cpu_seconds * scale

    @property
    def cpu_seconds_per_gb(self) -> float:
        return self.cpu_seconds / max(1e-9, self.raw_bytes_processed / 1e9)


@dataclass(frozen=True, kw_only=True)
class AdmissionDecision:
    group: str
    decision: str  # admit | hold | reject
    reason: str
    evidence: AdmissionEvidence
    noise: NoiseRisk | None
    cost: CleaningCost | None
    policy: AdmissionPolicy
    corpus_noise: NoiseRisk | None = None  # the admitted corpus's funnel, the yardstick

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.noise is not None:
            out["noise"]["risk"] = self.noise.risk
        if self.corpus_noise is not None:
            out["corpus_noise"]["risk"] = self.corpus_noise.risk
        if self.cost is not None:
            out["cost"]["cpu_seconds_full"] = self.cost.cpu_seconds_full
            out["cost"]["cpu_seconds_per_gb"] = self.cost.cpu_seconds_per_gb
        return out


def _by_seed(runs: Sequence[ExperimentResult], side: str) -> dict[int, ExperimentResult]:
    out: dict[int, ExperimentResult] = {}
    for run in runs:
        seed = int(run.spec["seed"])
        if seed in out:
            raise DataError(
                f"two {side} experiments with seed {seed}: {out[seed].name}, {run.name}"
            )
        out[seed] = run
    return out


def admission_evidence(
    *,
    group: str,
    with_runs: Sequence[ExperimentResult],
    without_runs: Sequence[ExperimentResult],
    sources: Collection[str] = (),
) -> AdmissionEvidence:
    """Paired per-seed changes in validation bits per byte, per source and on average; with
    the group's ``sources``, also ``"own"``: the average over those the validation measures."""
    with_, without = _by_seed(with_runs, "with"), _by_seed(without_runs, "without")
    seeds = tuple(sorted(set(with_) & set(without)))
    if not seeds:
        raise DataError(f"admission of {group!r}: no seed has both a with and a without run")
    measured = sorted(
        set.intersection(*(set(r.bits_per_byte) for r in (*with_runs, *without_runs))) - {"overall"}
    )
    own = tuple(sorted(set(sources) & set(measured)))
    changes: dict[str, list[float]] = {
        s: [] for s in [*measured, "mean", *(["own"] if own else [])]
    }
    for seed in seeds:
        a, b = with_[seed], without[seed]
        for s in measured:
            changes[s].append(a.bits_per_byte[s] - b.bits_per_byte[s])
        changes["mean"].append(a.mean_bits_per_byte - b.mean_bits_per_byte)
        if own:
            changes["own"].append(float(np.mean([changes[s][-1] for s in own])))
    runs = [*with_.values(), *without.values()]
    return AdmissionEvidence(
        group=group,
        seeds=seeds,
        delta_bpb={k: float(np.mean(v)) for k, v in changes.items()},
        spread_bpb={
            k: float(np.std(v, ddof=1)) if len(v) > 1 else math.nan for k, v in changes.items()
        },
        with_experiments=tuple(with_[s].name for s in seeds),
        without_experiments=tuple(without[s].name for s in seeds),
        proxy_flops=sum(r.cost["flops"] for r in runs),
        proxy_seconds=sum(r.cost["wall_s"] for r in runs),
        own_sources=own,
    )


def decide_admission(
    evidence: AdmissionEvidence,
    *,
    noise: NoiseRisk | None,
    cost: CleaningCost | None,
    policy: AdmissionPolicy,
    corpus: NoiseRisk | None = None,
) -> AdmissionDecision:
    """Admit, hold for review or reject (see :class:`AdmissionPolicy`), with the reason;
    ``corpus`` is the admitted corpus's funnel (:func:`corpus_noise`), when known."""
    excess = noise.risk - corpus.risk if noise is not None and corpus is not None else None
    key = "own" if policy.judge == "own_source" and "own" in evidence.delta_bpb else "mean"
    delta, spread = evidence.delta_bpb[key], evidence.spread_bpb[key]
    bound = policy.spread_factor * spread
    what = (
        f"its own source's ({', '.join(evidence.own_sources)}) validation bits per byte"
        if key == "own"
        else "mean validation bits per byte"
    )
    said = f"adding it changes {what} by {delta:+.4f} (seed spread {spread:.4f})"
    if len(evidence.seeds) < policy.min_seeds:
        decision, why = (
            "hold",
            f"only {len(evidence.seeds)} seed(s), policy needs {policy.min_seeds}",
        )
    elif -policy.min_gain < delta - bound and delta + bound < policy.max_harm:
        decision, why = (
            policy.no_gain,
            (
                f"the change and its spread lie within (-min_gain, max_harm) = "
                f"(-{policy.min_gain}, {policy.max_harm}): it adds nothing the proxies can "
                f"measure (no_gain={policy.no_gain})"
            ),
        )
    elif not abs(delta) > bound:
        decision, why = "hold", "the change is within the seed spread: inconclusive"
    elif delta >= policy.max_harm:
        decision, why = (
            "reject",
            f"it makes the proxies worse by more than max_harm={policy.max_harm}",
        )
    elif delta > 0:
        decision, why = "hold", f"the harm is below max_harm={policy.max_harm}: review it"
    elif delta > -policy.min_gain:
        decision, why = "hold", f"the gain is below min_gain={policy.min_gain}"
    elif noise is not None and noise.risk > policy.max_noise_risk:
        decision, why = (
            "hold",
            (
                f"it helps, but cleaning removed {noise.risk:.0%} of it (max_noise_risk="
                f"{policy.max_noise_risk:.0%}): review it"
            ),
        )
    elif excess is not None and excess > policy.max_excess_noise:
        assert noise is not None and corpus is not None
        decision, why = (
            "hold",
            (
                f"it helps, but cleaning removed {noise.risk:.0%} of it, {excess:.0%} more than "
                f"of the admitted corpus ({corpus.risk:.0%}; max_excess_noise="
                f"{policy.max_excess_noise:.0%}): review it"
            ),
        )
    elif noise is not None and noise.toxic_share > policy.max_toxic_share:
        decision, why = (
            "hold",
            (
                f"it helps, but {noise.toxic_share:.1%} of it is toxic (max_toxic_share="
                f"{policy.max_toxic_share:.1%}): review it"
            ),
        )
    else:
        decision, why = "admit", f"it lowers it by more than min_gain={policy.min_gain}"
    return AdmissionDecision(
        group=evidence.group,
        decision=decision,
        reason=f"{said}; {why}",
        evidence=evidence,
        noise=noise,
        cost=cost,
        policy=policy,
        corpus_noise=corpus,
    )
