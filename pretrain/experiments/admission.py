"""Admission of a new shard group: how much a token of it is worth next to a token of clean data
of its kind, what cleaning it cost, and a policy that turns both into admit, hold, or reject.

    evidence = admission_evidence(group="forum-0007", with_runs=[...], without_runs=[...],
                                  floor_runs=[...], reference_runs=[...], sources={"web"},
                                  kind="web", targets={"clean_web": "web"})
    value = relative_value(evidence, "target:clean_web")
    value.value, value.spread       # 0.82 ± 0.07: 0 is the floor, 1 the reference
    decision = decide_admission(evidence, noise=NoiseRisk(...), cost=CleaningCost(...),
                                policy=AdmissionPolicy(), corpus=corpus_noise([...]))
    decision.decision               # "admit", "hold" or "reject"; decision.reason says why

Every arm is a proxy of the same budget and seed (an anneal of the same start): the corpus
alone (*without*), with the group at ``probe_share`` of the budget (*with*), with the group's
own text, the words of each sentence shuffled, at the same share (*floor*: vocabulary without
language), and with as many tokens of clean data of the group's kind (*reference*: the basis's
reserve of that source, which no start proxy and no validation set holds). A change is an arm's
bits per byte on the judged yardstick minus the without arm's, seed by seed. At proxy scale any
text of a language lowers that language's bits per byte through its vocabulary, so a change
alone does not say the data is good: the **relative value** places the group's change between
the floor's (0) and the reference's (1), and the policy admits on it. When the floor and the
reference are within their spread of each other the proxies cannot tell clean from damaged text
at this scale: the verdict is *hold, cannot see*, with the recipe to try next. A reference arm
reads as many tokens as the with arm puts in; a reserve smaller than that is read over and over
(``reference_epochs``), which makes clean data look no better than it is: past
``MAX_REFERENCE_EPOCHS`` the decision warns and says how to give it more (a target of that kind
with ``reference_share``, :mod:`pretrain.experiments.yardsticks`).

The noise risk is what the stages found in the group (shares rejected, duplicate, toxic, masked
for PII), judged against what they found in the admitted corpus's groups; the cleaning cost is
the CPU time the stages spent on it, per GB and for the whole group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pretrain.errors import ConfigError, DataError
from pretrain.experiments.run import ExperimentResult
from pretrain.settings import check_types

DECISIONS = ("admit", "hold", "reject")
JUDGES = ("mean", "own_source", "task_likelihood")
NAMED_JUDGES = ("target:", "bpb:", "task:")
CANNOT_SEE = "the proxies cannot separate clean from damaged text at this scale"
MAX_REFERENCE_EPOCHS = 1.5  # a reference arm that reads its reserve more often is warned about
MIN_LANGUAGE_SHARE = 0.7  # a group less of its main language than this, judged on one language


@dataclass(frozen=True, kw_only=True)
class AdmissionPolicy:
    """How a relative value (0: the group's floor, 1: clean data of its kind) becomes a verdict.

    ``admit_at`` / ``reject_at``: admit when the value and its band (± ``spread_factor`` × its
    spread over seeds) lie at or above ``admit_at``; reject when they lie at or below
    ``reject_at``; hold for review in between. When the floor's and the reference's changes are
    not ``spread_factor`` spreads apart, and at least ``min_separation`` bits per byte, the
    proxies cannot see: hold, with the next recipe to try. A group with no reference (its
    source has no reserve and no target of its kind) is held for review. A group that would be
    admitted is held too when its toxic share exceeds ``max_toxic_share``, when cleaning
    removed more of it than ``max_noise_risk``, or more than the admitted groups of the same
    sources lost plus ``max_excess_noise`` (their funnel is the yardstick,
    :func:`yardstick_groups`: web crawls lose most pages to cleaning, code almost none).

    ``judge``: the yardstick. ``own_source`` (default): a target set of the group's kind when
    the basis has one (``BasisConfig.targets`` with ``kind``), else the held-out documents of
    the group's own sources; ``mean``: every source's, averaged; or a yardstick by name:
    ``target:<name>``, ``bpb:<source>``, ``task:<task>``, ``task_likelihood``."""

    admit_at: float = 0.6  # admit at this relative value or more, beyond its spread
    reject_at: float = 0.3  # reject at this relative value or less, beyond its spread
    spread_factor: float = 1.0  # how many spreads over seeds a band reaches
    min_separation: float = 0.002  # bits per byte between the floor and the reference
    min_seeds: int = 2  # fewer seeds measure no spread: the group is held
    max_noise_risk: float = 0.9  # hold a worthy group cleaning removed more of
    max_excess_noise: float = 0.2  # hold one it removed this much more of than of its peers
    max_toxic_share: float = 0.05  # hold one with more toxic documents
    judge: str = "own_source"  # the yardstick (see above)

    def __post_init__(self) -> None:
        check_types(self)
        if not self.reject_at < self.admit_at:
            raise ConfigError(
                f"AdmissionPolicy: reject_at={self.reject_at} must be below "
                f"admit_at={self.admit_at} (between them a group is held for review)"
            )
        if min(self.spread_factor, self.min_separation) < 0:
            raise ConfigError("AdmissionPolicy: spread_factor and min_separation must be >= 0")
        if self.min_seeds < 2:
            raise ConfigError(
                f"AdmissionPolicy.min_seeds={self.min_seeds}: at least 2 seeds, or no spread "
                "can be measured"
            )
        if self.judge not in JUDGES and not self.judge.startswith(NAMED_JUDGES):
            raise ConfigError(
                f"AdmissionPolicy.judge={self.judge!r}: use one of {JUDGES} or a yardstick "
                "named target:<name>, bpb:<source>, task:<task>, task_likelihood"
            )
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
    seeds: tuple[int, ...] = (0, 1, 2)  # one set of arms per seed (at least policy.min_seeds)
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


ARMS = ("with", "floor", "reference")


@dataclass(frozen=True, kw_only=True)
class AdmissionEvidence:
    """Each arm's change against the without arm, seed by seed, on every yardstick the proxies
    were scored on (sources, ``mean``, ``own``, ``target:<name>``, ``task:<task>``), and what
    the decision needs to choose one and to trust it."""

    group: str
    seeds: tuple[int, ...]
    changes: dict[str, dict[str, tuple[float, ...]]]  # arm -> yardstick -> change per seed
    experiments: dict[str, tuple[str, ...]]  # arm (and "without") -> experiment names
    proxy_flops: float
    proxy_seconds: float
    own_sources: tuple[str, ...] = ()  # the group's sources the validation set measures ("own")
    kind: str | None = None  # the group's source: its reference's, its target's
    language: str | None = None  # the group's main language (its yardstick should match)
    language_share: float | None = None  # the share of its documents in that language
    targets: dict[str, str | None] = field(default_factory=dict)  # target set -> its kind
    yardsticks: dict[str, dict[str, Any]] = field(default_factory=dict)  # basis.json's stats
    reserve_tokens: int | None = None  # the reserve of its kind the reference arm reads
    reference_epochs: float | None = None  # how many times the reference arm reads it
    reference_from: tuple[str, ...] = ()  # the target sets that gave part of that reserve

    @property
    def delta_bpb(self) -> dict[str, float]:
        """The with arm's mean change per yardstick (lower is better)."""
        return {k: float(np.mean(v)) for k, v in self.changes["with"].items()}

    @property
    def spread_bpb(self) -> dict[str, float]:
        """The with arm's spread over seeds per yardstick (std, ddof 1)."""
        return {k: _spread(v) for k, v in self.changes["with"].items()}

    def yardstick(self, judge: str) -> str:
        """The yardstick ``judge`` names for this group (see :class:`AdmissionPolicy`)."""
        keys = self.changes["with"]
        if judge == "own_source":
            own = [f"target:{t}" for t, k in sorted(self.targets.items()) if k == self.kind]
            found = [k for k in own if k in keys]
            return found[0] if found else ("own" if "own" in keys else "mean")
        key = judge[4:] if judge.startswith("bpb:") else judge
        if key not in keys:
            raise DataError(
                f"admission of {self.group!r}: no yardstick {judge!r}; the proxies were scored "
                f"on {sorted(keys)}"
            )
        return key

    def warnings(self, key: str, min_docs: int | None = None) -> list[str]:
        """Why ``key`` may be too small or too mixed to judge this group by (the basis's size
        warnings and the group's language against the yardstick's)."""
        from pretrain.experiments.yardsticks import YardstickStats, yardstick_warnings

        names = list(self.own_sources) if key == "own" else [key]
        found: list[str] = []
        for name in names:
            entry = self.yardsticks.get(name)
            if entry is None:
                continue
            found += list(entry.get("warnings", []))
            stats = YardstickStats.from_dict(entry)
            found += yardstick_warnings(
                name, stats, language=self.language,
                min_docs=min_docs if min_docs is not None else 0,
            )  # fmt: skip
            share = self.language_share
            if (share is not None and share < MIN_LANGUAGE_SHARE
                    and stats.languages.get(self.language or "", 0.0) >= 0.9):  # fmt: skip
                found.append(
                    f"the group is {share:.0%} {self.language} and yardstick {name} is "
                    f"{stats.languages[self.language or '']:.0%} {self.language}: its other "
                    "languages count for nothing here; judge it on a yardstick of its mix too "
                    "(judge='mean', or a target of each language)"
                )
        return list(dict.fromkeys(found))

    def reference_warnings(self, key: str = "") -> list[str]:
        """Why the reference may mislead on yardstick ``key``: its arm reads a small reserve
        many times over (repeated tokens are worth less than fresh ones, so clean data looks
        no better than the floor, or a group better than clean data), or part of the reserve
        is the very target it is judged on (text of the yardstick's own make-up, uncleaned,
        beats any group cleaned as the corpus is: a good group looks worthless)."""
        found = []
        epochs = self.reference_epochs
        if epochs is not None and epochs > MAX_REFERENCE_EPOCHS:
            found.append(
                f"the reference arm reads the {self.reserve_tokens:,}-token reserve of "
                f"{self.kind} {epochs:.1f} times over: too little clean {self.kind} to value "
                f"against; give a target of kind {self.kind} with reference_share "
                "(BasisConfig.targets) or admit more of it first"
            )
        judged = [name for name in self.reference_from if key == f"target:{name}"]
        if judged:
            found.append(
                f"part of the reference is target {judged[0]}, the yardstick it is judged on: "
                "clean data of the yardstick's own make-up can look far better than a group "
                f"cleaned as the corpus is; give {self.kind} text cleaned as the corpus is as "
                "the reference (a target with reference_share 1.0)"
            )
        return found


def _spread(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


@dataclass(frozen=True, kw_only=True)
class RelativeValue:
    """Where the group's change lies between its floor's (0) and its reference's (1), on one
    yardstick: the mean over seeds of ``(group - floor) / (reference - floor)``, its spread, and
    the separation of floor and reference that it stands on."""

    yardstick: str
    value: float
    spread: float
    group_change: float
    floor_change: float
    reference_change: float
    separation: float  # floor change minus reference change, mean over seeds (> 0: they part)
    separation_spread: float

    def visible(self, policy: AdmissionPolicy) -> bool:
        """The proxies tell the floor from the reference (beyond spread and min_separation)."""
        return self.separation > max(
            policy.spread_factor * self.separation_spread, policy.min_separation
        ) and math.isfinite(self.value)


def relative_value(evidence: AdmissionEvidence, key: str) -> RelativeValue | None:
    """The group's relative value on yardstick ``key`` (None without a reference arm)."""
    if "reference" not in evidence.changes or key not in evidence.changes["reference"]:
        return None
    group = np.asarray(evidence.changes["with"][key])
    floor = np.asarray(evidence.changes["floor"][key])
    reference = np.asarray(evidence.changes["reference"][key])
    separation = floor - reference
    with np.errstate(divide="ignore", invalid="ignore"):
        per_seed = np.where(np.abs(separation) > 1e-12, (floor - group) / separation, np.nan)
    return RelativeValue(
        yardstick=key,
        value=float(np.mean(per_seed)),
        spread=_spread(per_seed.tolist()),
        group_change=float(np.mean(group)),
        floor_change=float(np.mean(floor)),
        reference_change=float(np.mean(reference)),
        separation=float(np.mean(separation)),
        separation_spread=_spread(separation.tolist()),
    )


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
    corpus_noise: NoiseRisk | None = None  # the admitted corpus's funnel, the noise yardstick
    yardstick: str = "mean"  # what the group was judged on
    relative: RelativeValue | None = None
    cannot_see: bool = False  # the proxies could not tell its floor from its reference
    next_recipe: str | None = None  # what to try when they could not
    warnings: tuple[str, ...] = ()  # why the yardstick may be unfit to judge by

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["evidence"]["delta_bpb"] = self.evidence.delta_bpb
        out["evidence"]["spread_bpb"] = self.evidence.spread_bpb
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


def _yardstick_values(run: ExperimentResult, measured: Sequence[str]) -> dict[str, float]:
    """What ``run`` scored on every yardstick: each measured source, the mean, the targets and
    the tasks (their correct-answer probability negated: lower is better everywhere)."""
    values = {s: run.bits_per_byte[s] for s in measured}
    values["mean"] = run.mean_bits_per_byte
    values.update({f"target:{t}": v for t, v in run.targets.items()})
    values.update({f"task:{t}": -v["correct_prob"] for t, v in run.tasks.items()})
    return values


def admission_evidence(
    *,
    group: str,
    with_runs: Sequence[ExperimentResult],
    without_runs: Sequence[ExperimentResult],
    floor_runs: Sequence[ExperimentResult] = (),
    reference_runs: Sequence[ExperimentResult] = (),
    sources: Collection[str] = (),
    kind: str | None = None,
    language: str | None = None,
    language_share: float | None = None,
    targets: Mapping[str, str | None] | None = None,
    yardsticks: Mapping[str, dict[str, Any]] | None = None,
    reserve_tokens: int | None = None,
    reference_from: Sequence[str] = (),
) -> AdmissionEvidence:
    """Paired per-seed changes of each arm against the without arm on every yardstick; with
    the group's ``sources``, also ``"own"``: the average over those the validation measures.
    A seed counts when every arm given has run it. ``reserve_tokens``: the size of the reserve
    the reference arm reads (basis.json's ``reserve``), to say how often it reads it;
    ``reference_from``: the targets that gave part of it (basis.json's ``reserve_from``)."""
    arms = {"with": with_runs, "floor": floor_runs, "reference": reference_runs}
    arms = {arm: runs for arm, runs in arms.items() if runs or arm == "with"}
    by_seed = {arm: _by_seed(runs, arm) for arm, runs in arms.items()}
    without = _by_seed(without_runs, "without")
    seeds = tuple(sorted(set(without).intersection(*(set(b) for b in by_seed.values()))))
    if not seeds:
        raise DataError(f"admission of {group!r}: no seed has every arm and a without run")
    everything = [*without_runs, *(r for runs in arms.values() for r in runs)]
    measured = sorted(set.intersection(*(set(r.bits_per_byte) for r in everything)) - {"overall"})
    own = tuple(sorted(set(sources) & set(measured)))
    changes: dict[str, dict[str, tuple[float, ...]]] = {}
    for arm, runs in by_seed.items():
        per_key: dict[str, list[float]] = {}
        for seed in seeds:
            a = _yardstick_values(runs[seed], measured)
            b = _yardstick_values(without[seed], measured)
            for key in a.keys() & b.keys():
                per_key.setdefault(key, []).append(a[key] - b[key])
            if own:
                per_key.setdefault("own", []).append(float(np.mean([a[s] - b[s] for s in own])))
        changes[arm] = {k: tuple(v) for k, v in sorted(per_key.items()) if len(v) == len(seeds)}
    experiments = {arm: tuple(runs[s].name for s in seeds) for arm, runs in by_seed.items()}
    experiments["without"] = tuple(without[s].name for s in seeds)
    used = [r for b in (*by_seed.values(), without) for s, r in b.items() if s in seeds]
    return AdmissionEvidence(
        group=group,
        seeds=seeds,
        changes=changes,
        experiments=experiments,
        proxy_flops=sum(r.cost["flops"] for r in used),
        proxy_seconds=sum(r.cost["wall_s"] for r in used),
        own_sources=own,
        kind=kind,
        language=language,
        language_share=language_share,
        targets=dict(targets or {}),
        yardsticks=dict(yardsticks or {}),
        reserve_tokens=reserve_tokens,
        reference_epochs=_epochs(reference_runs, reserve_tokens),
        reference_from=tuple(reference_from),
    )


def _epochs(runs: Sequence[ExperimentResult], reserve_tokens: int | None) -> float | None:
    """How many times a reference arm reads a reserve of ``reserve_tokens``: its share of the
    budget (the variant's boost) times the tokens it trained on, over the reserve's size."""
    if not runs or not reserve_tokens:
        return None
    run = runs[0]
    share = sum(float(v) for v in dict(run.spec.get("variant", {}).get("boost", {})).values())
    return share * float(run.cost.get("tokens", 0.0)) / reserve_tokens if share else None


def decide_admission(
    evidence: AdmissionEvidence,
    *,
    noise: NoiseRisk | None,
    cost: CleaningCost | None,
    policy: AdmissionPolicy,
    corpus: NoiseRisk | None = None,
    next_recipe: str | None = None,
) -> AdmissionDecision:
    """Admit, hold for review or reject (see :class:`AdmissionPolicy`), with the reason;
    ``corpus`` is the admitted corpus's funnel (:func:`corpus_noise`), when known;
    ``next_recipe`` the recipe a "cannot see" verdict names."""
    key = evidence.yardstick(policy.judge)
    value = relative_value(evidence, key)
    delta, spread = evidence.delta_bpb[key], evidence.spread_bpb[key]
    said = (
        f"on {_yardstick_name(evidence, key)} adding it changes {delta:+.4f} (spread {spread:.4f})"
    )
    cannot_see = False
    if len(evidence.seeds) < policy.min_seeds:
        decision, why = (
            "hold",
            f"only {len(evidence.seeds)} seed(s), policy needs {policy.min_seeds}",
        )
    elif value is None:
        decision, why = (
            "hold",
            f"no clean data of its kind ({evidence.kind or 'unknown source'}) to compare it with: "
            "the basis holds no reserve of that source and no target set of that kind "
            "(BasisConfig.targets with kind); review it",
        )
    else:
        said += (
            f"; relative value {value.value:.2f} ± {value.spread:.2f} between its floor "
            f"(shuffled words, {value.floor_change:+.4f} = 0) and clean {evidence.kind} "
            f"({value.reference_change:+.4f} = 1)"
        )
        decision, why, cannot_see = _verdict(value, policy, next_recipe)
        if decision == "admit":
            decision, why = _noise_check(noise, corpus, policy, why)
    warnings = evidence.warnings(key) + (evidence.reference_warnings(key) if value else [])
    return AdmissionDecision(
        group=evidence.group,
        decision=decision,
        reason=f"{said}; {why}",
        evidence=evidence,
        noise=noise,
        cost=cost,
        policy=policy,
        corpus_noise=corpus,
        yardstick=key,
        relative=value,
        cannot_see=cannot_see,
        next_recipe=next_recipe if cannot_see else None,
        warnings=tuple(warnings),
    )


def _yardstick_name(evidence: AdmissionEvidence, key: str) -> str:
    if key == "own":
        return f"its own source's ({', '.join(evidence.own_sources)}) held-out documents"
    if key == "mean":
        return "every source's held-out documents (mean)"
    return key if ":" in key else f"{key}'s held-out documents"


def _verdict(
    value: RelativeValue, policy: AdmissionPolicy, next_recipe: str | None
) -> tuple[str, str, bool]:
    """(decision, why, cannot see) from the relative value alone."""
    if not value.visible(policy):
        step = f"; try recipe {next_recipe}" if next_recipe else "; try a larger proxy recipe"
        return (
            "hold",
            f"{CANNOT_SEE} (floor and reference {value.separation:+.4f} apart, spread "
            f"{value.separation_spread:.4f}){step}",
            True,
        )
    band = policy.spread_factor * value.spread
    if value.value - band >= policy.admit_at:
        return (
            "admit",
            f"a token of it is worth at least admit_at={policy.admit_at} of one of clean data",
            False,
        )
    if value.value + band <= policy.reject_at:
        return (
            "reject",
            f"a token of it is worth at most reject_at={policy.reject_at} of one of clean data",
            False,
        )
    return (
        "hold",
        f"its value is not clearly above admit_at={policy.admit_at} or below "
        f"reject_at={policy.reject_at}: review it",
        False,
    )


def _noise_check(
    noise: NoiseRisk | None, corpus: NoiseRisk | None, policy: AdmissionPolicy, why: str
) -> tuple[str, str]:
    """A group worth admitting is held when cleaning found too much noise or toxicity."""
    excess = noise.risk - corpus.risk if noise is not None and corpus is not None else None
    if noise is not None and noise.risk > policy.max_noise_risk:
        return "hold", (
            f"it is worth it, but cleaning removed {noise.risk:.0%} of it (max_noise_risk="
            f"{policy.max_noise_risk:.0%}): review it"
        )
    if excess is not None and excess > policy.max_excess_noise:
        assert noise is not None and corpus is not None
        return "hold", (
            f"it is worth it, but cleaning removed {noise.risk:.0%} of it, {excess:.0%} more "
            f"than of the admitted corpus ({corpus.risk:.0%}; max_excess_noise="
            f"{policy.max_excess_noise:.0%}): review it"
        )
    if noise is not None and noise.toxic_share > policy.max_toxic_share:
        return "hold", (
            f"it is worth it, but {noise.toxic_share:.1%} of it is toxic (max_toxic_share="
            f"{policy.max_toxic_share:.1%}): review it"
        )
    return "admit", why
