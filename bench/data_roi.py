"""Data ROI (issue 25, "Measured"): do proxy experiments decide data correctly, and cheaply?

    .venv/bin/python bench/data_roi.py                       # all parts; hours on a loaded 2-core box
    .venv/bin/python bench/data_roi.py --part admission      # or search, overhead
    .venv/bin/python bench/data_roi.py --quick               # smoke run: small budgets, minutes
    nohup .venv/bin/python bench/data_roi.py > /tmp/data_roi.log 2>&1 &

The corpus (``bench/_roi_corpus.py``, read from ``../shared/data``; the bench skips cleanly
without it): five sources (news, books, web, code, wiki), their ``-0000`` groups the admitted
corpus, and seven planted groups. Everything goes through the library, as the assets would call
it: :func:`~pretrain.experiments.basis.build_basis` (proxy tokenizer + validation set from the
admitted groups), :func:`~pretrain.experiments.pools.build_pool` per group,
:func:`~pretrain.experiments.run.run_experiment` (in-process training) per experiment.

1. **admission** -- each planted group with and without (``admission_specs``, seeds
   ``ADMISSION_SEEDS``), decided by :func:`decide_admission` with the default
   :class:`AdmissionPolicy` (``judge="own_source"``) and again with ``judge="mean"``, its
   noise risk from the real filter stage (``filter_shard`` with ``FilterConfig()``: the kept
   share shows the harmful groups pass it) against the admitted groups' own, recipe
   ``proxy_cpu_anneal`` (``AdmissionConfig``'s default: both arms of a seed continue one
   ``proxy_cpu_admit`` proxy trained on the admitted corpus). Baseline: the expected decision
   (harmful: reject, helpful: admit); each change must exceed its seed spread.
   ``--truth-at-scale`` trains every group again with the larger recipe, from scratch, with
   and without it (``--scale-seeds N``: seeds 0..N-1, default 3): their verdict (helpful,
   harmful or unsettled, on the group's own source for the default judge, on the mean for
   ``judge="mean"``) is the truth the decisions are scored against, next to the planted
   label. ``--groups`` decides only some groups (two processes can share the work folder once
   its setup exists);
   ``--admit-recipe`` tries another probe.
2. **search** -- RegMix over the admitted corpus (``SEARCH_CANDIDATES`` proxies, one seed,
   anneals of the seed's start: ``SearchConfig``'s recipe), then the searched, the other
   regression's proposal, natural and uniform mixtures (and ``RANK_EXTRA`` search candidates) in
   larger runs (recipe ``proxy_cpu_large``) at equal tokens, seeds ``LARGE_SEEDS``; rank
   agreement proxy vs larger run (Spearman over the mixtures trained at both); the proxies'
   FLOPs as a share of the larger runs'. ``--target`` picks the search's target (RegMix's own
   was one domain's validation loss: ``bpb:web``); ``--jobs 2`` trains the larger runs two at
   a time.
3. **overhead** -- per proxy, what a run costs beyond its training steps: in process (from
   every proxy this bench ran: ``wall_s`` - the steps' own time), and through Dagster
   (``bench/_roi_dagster.py``: ``proxy_runs`` materialized in process and on the Ray executor).

Deterministic given the seeds below (the corpus cut, the basis, the view offsets, the search's
Dirichlet draws, the proxies' init and data order). Work files are kept in ``--work`` and reused
by a rerun with the same settings (``--fresh`` starts over). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import inspect
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")

CORPUS_SEED = 0
BASIS_SEED = 0
VOCAB = 1024  # the proxy tokenizer (BasisConfig.vocab_size)
ADMISSION_SEEDS = (10, 11, 12)  # the dev runs that chose the recipe used 0, 1, 2
PROBE_SHARE = 0.25
SEARCH_SEED = 0
SEARCH_CANDIDATES = 10  # --candidates 32 was measured too (bench/RESULTS.md)
RANK_EXTRA = 1  # search candidates also trained at the larger scale (rank agreement)
LARGE_SEEDS = (0, 1, 2, 3, 4)  # searched, natural, uniform; the other proposal: the first 3
PROXY, LARGE = "proxy_cpu_mix_anneal", "proxy_cpu_large"  # SearchConfig().recipe: anneals
OVERHEAD_PROXY = "proxy_cpu"  # a proxy trained from scratch (one partition, no start to run)
ADMIT = "proxy_cpu_anneal"  # AdmissionConfig().recipe: anneals of a shared proxy_cpu_admit
_ENV = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "17179869184",
        "MALLOC_TOP_PAD_": "1073741824"}  # fmt: skip


@dataclasses.dataclass
class Setup:
    work: Path
    corpus: object  # _roi_corpus.Corpus
    pools: dict  # group -> [PoolInfo] (one per source; one source per group here)
    basis_stats: dict
    seconds: dict

    @property
    def base_groups(self) -> list[str]:
        return sorted(f"{s}-0000" for s in self.corpus.base)

    def pools_of(self, groups: list[str]) -> list:
        return [pool for g in groups for pool in self.pools[g]]


def build_setup(work: Path) -> Setup:
    """Corpus, basis and one pool per group (reused from ``work`` when already made)."""
    from _roi_corpus import Corpus, PlantedGroup, build_corpus

    from pretrain import storage
    from pretrain.experiments.basis import BasisConfig, build_basis, validation_ids
    from pretrain.experiments.pools import build_pool, read_pool

    marker = work / "setup.json"
    import _roi_corpus

    import pretrain.experiments.basis as basis_module

    corpus_code = _roi_corpus.fingerprint().encode()
    setup_code = (inspect.getsource(build_setup) + inspect.getsource(kept_documents)
                  + inspect.getsource(basis_module))  # fmt: skip
    fingerprint = hashlib.sha256(
        corpus_code + setup_code.encode() + f"{VOCAB}:{CORPUS_SEED}:{BASIS_SEED}".encode()
    )
    if (
        marker.exists()
        and json.loads(marker.read_text()).get("fingerprint") != fingerprint.hexdigest()
    ):
        # another corpus or basis: rebuild them; keep runs/, each is reused only when the
        # pools it reads are described the same (sizes, tokenizer digest: see ``run``), and
        # rescored when only the validation set changed
        for stale in ("corpus", "filtered", "basis", "pools", "setup.json"):
            path = work / stale
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    if marker.exists():
        saved = json.loads(marker.read_text())
        corpus = Corpus(base=saved["base"], chars=saved["chars"],
                        planted={g: PlantedGroup(**p) for g, p in saved["planted"].items()})  # fmt: skip
        pools = {g: read_pool(str(work / "pools" / g)) for g in saved["chars"]}
        return Setup(work, corpus, pools, saved["basis"], saved["seconds"])
    seconds = {}
    started = time.perf_counter()
    corpus = build_corpus(SHARED, work / "corpus", seed=CORPUS_SEED)
    seconds["corpus"] = time.perf_counter() - started
    started = time.perf_counter()
    kept = kept_documents(work, corpus)
    seconds["filter"] = time.perf_counter() - started
    started = time.perf_counter()
    config = BasisConfig(vocab_size=VOCAB, val_fraction=0.15, seed=BASIS_SEED)
    admitted = sorted(f"{s}-0000" for s in corpus.base)
    basis = build_basis([kept[g] for g in admitted], str(work / "basis"), config,
                        shard_groups=admitted)  # fmt: skip
    seconds["basis"] = time.perf_counter() - started
    started = time.perf_counter()
    held = validation_ids(str(work / "basis"))
    pools = {
        group: build_pool(
            [documents],
            str(work / "basis" / "tokenizer"),
            str(work / "pools" / group),
            group=group,
            seq_len=config.seq_len,
            exclude_ids=held,
        )  # fmt: skip
        for group, documents in sorted(kept.items())
    }
    seconds["pools"] = time.perf_counter() - started
    saved = {"base": corpus.base, "chars": corpus.chars, "basis": basis.as_metadata(),
             "planted": {g: dataclasses.asdict(p) for g, p in corpus.planted.items()},
             "seconds": seconds, "fingerprint": fingerprint.hexdigest()}  # fmt: skip
    storage.write_json(saved, str(marker))
    return Setup(work, corpus, pools, saved["basis"], seconds)


def kept_documents(work: Path, corpus) -> dict[str, str]:
    """Group -> what the filter stage (``FilterConfig()``) kept of it: as in a campaign, where
    the basis (validation set, tokenizer) and ``proxy_pools`` read the cleaned documents of the
    admitted groups, and a new group's pool holds what cleaning kept of it."""
    from _roi_corpus import filter_check

    raw = {f"{source}-0000": Path(path) for source, path in corpus.base.items()}
    raw.update({group: Path(planted.path) for group, planted in corpus.planted.items()})
    for group, path in sorted(raw.items()):
        filter_check(path, work / "filtered" / group)
    return {group: str(work / "filtered" / group / "documents.parquet") for group in sorted(raw)}


def quick_recipes() -> tuple[str, str, str]:
    """``--quick``: the recipes with 1/8 or 1/16 of their token budget, registered under
    ``*_quick`` names for this process only (a smoke run checks the plumbing, not the data)."""
    from pretrain.experiments.config import PROXY_RECIPES

    names = []
    start = PROXY_RECIPES[ADMIT].starts_from
    for name, cut in ((PROXY, 8), (LARGE, 16), (ADMIT, 16), (start, 16)):
        recipe = PROXY_RECIPES[name]
        quick = dataclasses.replace(recipe, name=f"{name}_quick",
                                    token_budget=recipe.token_budget // cut)  # fmt: skip
        if quick.starts_from:
            quick = dataclasses.replace(quick, starts_from=f"{quick.starts_from}_quick")
        PROXY_RECIPES[quick.name] = quick
        names.append(quick.name)
    return names[0], names[1], names[2]


def _steps_s(out: Path) -> float:
    metrics = out / "run" / "proxy" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return sum(float(r.get("step_time_s") or 0.0) for r in rows)


@functools.cache
def _files_digest(folder: str, pattern: str) -> str:
    """sha256 of the names and bytes of ``folder``'s files matching ``pattern`` (read once per
    process: a setup is built, or rebuilt, before any run)."""
    digest = hashlib.sha256()
    for path in sorted(Path(folder).glob(pattern)):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def _pools_digest(setup: Setup, groups: list[str]) -> str:
    """Names the pools a run reads by what they hold (sizes, tokenizer, a digest of their
    tokens), not where they lie: a rebuilt pool with the same tokens is the same run."""
    described = [
        {**{k: v for k, v in dataclasses.asdict(p).items() if k != "path"},
         "tokens_sha256": _files_digest(p.path, "*.bin")}
        for p in setup.pools_of(sorted(groups))
    ]  # fmt: skip
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def _val_digest(setup: Setup) -> str:
    """Names the validation set every run is scored on (its packed token files)."""
    return _files_digest(str(setup.work / "basis" / "validation"), "val-*.bin")[:16]


def run(setup: Setup, spec, groups: list[str], base=None) -> dict:
    """One experiment (reused when ``work/runs/<name>`` holds it with the same recipe and
    pools; rescored, not retrained, when only the validation set changed): its result and
    what it cost (wall, CPU, the steps' own time, the load average). An anneal gets
    ``base``, the result of the proxy it continues."""
    from pretrain.experiments.config import ExperimentSpec, get_proxy_recipe
    from pretrain.experiments.run import read_result, rescore_experiment, run_experiment

    out = setup.work / "runs" / spec.name
    recipe = dataclasses.asdict(get_proxy_recipe(spec.recipe))
    pools, val = _pools_digest(setup, groups), _val_digest(setup)
    side = out / "bench.json"
    saved = json.loads(side.read_text()) if side.exists() else {}
    if saved.get("recipe") == recipe and saved.get("pools") == pools:
        result = read_result(str(out))
        # the same training (variant, recipe, seed); the labels may differ: one admission
        # baseline serves every group
        if (
            result is not None
            and ExperimentSpec.from_dict(result.spec).settings() == spec.settings()
        ):
            if saved.get("val") != val:
                result = rescore_experiment(
                    str(out), val_packed_dir=str(setup.work / "basis" / "validation"),
                    tokenizer_uri=str(setup.work / "basis" / "tokenizer"),
                )  # fmt: skip
                saved["val"] = val
                side.write_text(json.dumps(saved))
                print(f"  {spec.name:34s} rescored on the new validation set: "
                      f"mean_bpb={result.mean_bits_per_byte:.4f}", flush=True)  # fmt: skip
            return {**saved, "result": result, "reused": True}
    shutil.rmtree(out, ignore_errors=True)
    load = os.getloadavg()[0]
    cpu = time.process_time()
    result = run_experiment(
        spec, setup.pools_of(groups), val_packed_dir=str(setup.work / "basis" / "validation"),
        tokenizer_uri=str(setup.work / "basis" / "tokenizer"), out_dir=str(out), base=base,
    )  # fmt: skip
    cost = {"recipe": recipe, "pools": pools, "val": val, "cpu_s": time.process_time() - cpu,
            "steps_s": _steps_s(out),
            "load_before": load, "load_after": os.getloadavg()[0]}  # fmt: skip
    side.write_text(json.dumps(cost))
    print(f"  {spec.name:34s} {spec.recipe:16s} mean_bpb={result.mean_bits_per_byte:.4f} "
          f"wall={result.cost['wall_s']:.1f}s cpu={cost['cpu_s']:.1f}s "
          f"load={load:.1f}", flush=True)  # fmt: skip
    return {**cost, "result": result, "reused": False}


def _worker(threads: int, quick: bool) -> None:
    import torch

    torch.set_num_threads(threads)
    if quick:
        quick_recipes()


def _run_quietly(job: tuple) -> str:
    setup, spec, groups = job
    run(setup, spec, groups)
    return spec.name


def prefetcher(setup: Setup, jobs: int, threads: int, quick: bool):
    """``prefetch(todo)``: train the (spec, groups) runs of ``todo`` -- from scratch, no
    anneals -- ``jobs`` at a time in spawned processes; each lands in ``work/runs`` as ``run``
    leaves it, so the sequential pass that follows reuses it. ``None`` for one job."""
    if jobs <= 1:
        return None

    def prefetch(todo: list) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker,
                                 initargs=(threads, quick)) as pool:  # fmt: skip
            list(pool.map(_run_quietly, [(setup, spec, groups) for spec, groups in todo]))

    return prefetch


def saved_runs(setup: Setup) -> list[dict]:
    """Every experiment of ``work/runs`` with its bench costs (reused ones included)."""
    from pretrain.experiments.run import read_result

    found = []
    for side in sorted((setup.work / "runs").glob("*/bench.json")):
        result = read_result(str(side.parent))
        if result is not None:
            found.append({**json.loads(side.read_text()), "result": result, "reused": True})
    return found


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _verdict(delta: float, spread: float) -> str:
    return "helpful" if delta < -spread else "harmful" if delta > spread else "unsettled"


def truth_at_scale(setup: Setup, rows: list[dict], seeds: tuple[int, ...], prefetch=None) -> dict:
    """Every group tried again where its value is settled rather than planted: the larger
    recipe trained from scratch with the group at the probe share and without it (paired
    seeds). The larger runs' verdict -- helpful (Δ below minus its spread), harmful (above
    its spread) or unsettled (within it: these runs cannot tell) -- sets the decision the
    proxies should have made: admit, reject, or none to score. Each row gets ``scale`` and
    ``correct_at_scale`` (``None`` when unsettled)."""
    from pretrain.experiments.admission import admission_evidence
    from pretrain.experiments.config import DataVariant, ExperimentSpec, experiment_name

    prefix = {"with": "check-with", "base": "scale"}  # base: the search's natural larger runs

    def arm(group: str, label: str) -> list[tuple]:
        """(spec, groups) of one arm's larger runs, one per seed."""
        variant = (DataVariant(include_groups=(group,), boost={group: PROBE_SHARE})
                   if label == "with" else DataVariant())  # fmt: skip
        groups = sorted([*setup.base_groups, group]) if label == "with" else setup.base_groups
        return [(ExperimentSpec(name=experiment_name(prefix[label], variant, s, LARGE),
                                variant=variant, recipe=LARGE, seed=s, label=label), groups)
                for s in seeds]  # fmt: skip

    if prefetch is not None:  # --jobs: train them all first, N at a time
        prefetch([job for row in rows for label in prefix for job in arm(row["group"], label)])
    out = {}
    for row in rows:
        group = row["group"]
        arms = {label: [run(setup, spec, groups)["result"] for spec, groups in arm(group, label)]
                for label in prefix}  # fmt: skip
        evidence = admission_evidence(group=group, with_runs=arms["with"],
                                      without_runs=arms["base"], sources={row["source"]})  # fmt: skip
        right = {"helpful": "admit", "harmful": "reject"}
        verdicts = {key: _verdict(evidence.delta_bpb[key], evidence.spread_bpb[key])
                    for key in ("own", "mean")}  # fmt: skip
        row["scale"] = {"recipe": LARGE, "seeds": list(seeds), "delta_bpb": evidence.delta_bpb,
                        "spread_bpb": evidence.spread_bpb, "verdict": verdicts["own"],
                        "mean_verdict": verdicts["mean"]}  # fmt: skip
        # the default judge (the own source) against the own-source verdict; judge="mean"
        # against the mean's, which also carries what the probe share displaces
        for key, decided, field in (("own", "decision", "correct_at_scale"),
                                    ("mean", "mean_decision", "mean_correct_at_scale")):  # fmt: skip
            verdict = verdicts[key]
            row[field] = row[decided] == right[verdict] if verdict in right else None
        out[group] = row["scale"]
        print(
            f"at {LARGE} scale, {group}: own source {evidence.delta_bpb['own']:+.4f} ± "
            f"{evidence.spread_bpb['own']:.4f} -> {verdicts['own']}, mean "
            f"{evidence.delta_bpb['mean']:+.4f} ± {evidence.spread_bpb['mean']:.4f} -> "
            f"{verdicts['mean']}; planted {row['kind']}, proxies {row['decision']}",
            flush=True,
        )
    mark = {True: "yes", False: "NO", None: "-"}
    print(f"\nadmission against the larger runs ({LARGE}, seeds {list(seeds)})")
    print(f"{'group':15s} {'planted':8s} | own: {'larger':>16s} {'verdict':>9s} {'proxies':>8s} "
          f"{'right?':>6s} | mean: {'larger':>16s} {'verdict':>9s} {'by mean':>8s} "
          f"{'right?':>6s}")  # fmt: skip
    for row in rows:
        sc = row["scale"]
        d, sd = sc["delta_bpb"], sc["spread_bpb"]
        print(f"{row['group']:15s} {row['kind']:8s} | {d['own']:+10.4f}±{sd['own']:.4f} "
              f"{sc['verdict']:>9s} {row['decision']:>8s} {mark[row['correct_at_scale']]:>6s} | "
              f"{d['mean']:+11.4f}±{sd['mean']:.4f} {sc['mean_verdict']:>9s} "
              f"{row['mean_decision']:>8s} {mark[row['mean_correct_at_scale']]:>6s}")  # fmt: skip
    return out


def admission_part(setup: Setup, seeds: tuple[int, ...], groups: list[str]) -> dict:
    from _roi_corpus import filter_check

    from pretrain.experiments import registry
    from pretrain.experiments.admission import (
        AdmissionPolicy,
        admission_evidence,
        corpus_noise,
        decide_admission,
        yardstick_groups,
    )

    policy = AdmissionPolicy()  # judge="own_source": the change on the group's own source
    mean_policy = AdmissionPolicy(judge="mean")  # the change averaged over every source
    recipe = ADMIT
    rows, runs = [], []
    # the proxies every arm of a seed continues (trained from scratch on the admitted corpus)
    starts = {s.seed: run(setup, s, setup.base_groups) for s in registry.starts_of(recipe, seeds)}
    runs += [r for r in starts.values() if not r["reused"]]
    start_of = {seed: r["result"] for seed, r in starts.items()}
    # the admitted corpus's funnel: what the same filter removes from the admitted groups
    admitted = {g: filter_check(setup.work / "corpus" / g / "documents.parquet",
                                setup.work / "filtered" / g) for g in setup.base_groups}  # fmt: skip
    sources = {g: {setup.corpus.planted[g].source} if g in setup.corpus.planted
               else {g.split("-")[0]} for g in [*admitted, *groups]}  # fmt: skip
    for group in groups:
        planted = setup.corpus.planted[group]
        check = filter_check(Path(planted.path), setup.work / "filtered" / group)
        with_specs, base_specs = registry.admission_specs(
            group, recipe=recipe, seeds=seeds, probe_share=PROBE_SHARE
        )
        base = [run(setup, s, setup.base_groups, base=start_of.get(s.seed)) for s in base_specs]
        with_ = [run(setup, s, sorted([*setup.base_groups, group]), base=start_of.get(s.seed))
                 for s in with_specs]  # fmt: skip
        runs += [r for r in base + with_ if not r["reused"]]
        evidence = admission_evidence(group=group, with_runs=[r["result"] for r in with_],
                                      without_runs=[r["result"] for r in base],
                                      sources=sources[group])  # fmt: skip
        yardstick = yardstick_groups(group, sources, list(admitted))
        corpus = corpus_noise([admitted[g]["noise"] for g in yardstick])
        decision = decide_admission(evidence, noise=check["noise"], cost=check["cost"],
                                    policy=policy, corpus=corpus)  # fmt: skip
        by_mean = decide_admission(evidence, noise=check["noise"], cost=check["cost"],
                                   policy=mean_policy, corpus=corpus)  # fmt: skip
        expected = "reject" if planted.kind == "harmful" else "admit"
        delta, spread = evidence.delta_bpb["own"], evidence.spread_bpb["own"]
        rows.append({
            "group": group, "kind": planted.kind, "how": planted.how, "source": planted.source,
            "expected": expected, "decision": decision.decision, "reason": decision.reason,
            "correct": decision.decision == expected, "delta_own_bpb": delta,
            "spread_own_bpb": spread, "exceeds_spread": abs(delta) > spread,
            "mean_decision": by_mean.decision, "mean_reason": by_mean.reason,
            "mean_correct": by_mean.decision == expected,
            "delta_mean_bpb": evidence.delta_bpb["mean"],
            "spread_mean_bpb": evidence.spread_bpb["mean"],
            "mean_exceeds_spread": abs(evidence.delta_bpb["mean"]) > evidence.spread_bpb["mean"],
            "delta_bpb": evidence.delta_bpb, "spread_bpb": evidence.spread_bpb,
            "kept_share": check["kept_share"],
            "dropped": check["dropped"], "noise_risk": check["noise"].risk,
            "yardstick": yardstick, "yardstick_noise_risk": corpus.risk if corpus else None,
            "filter_cpu_s": check["cost"].cpu_seconds,
            "proxy_flops": evidence.proxy_flops,
            "proxy_wall_s": sum(r["result"].cost["wall_s"] for r in with_),
            "proxy_cpu_s": sum(r["cpu_s"] for r in with_),
        })  # fmt: skip
    cost_of = lambda rs: {"wall_s": sum(r["result"].cost["wall_s"] for r in rs),  # noqa: E731
                          "cpu_s": sum(r["cpu_s"] for r in rs),
                          "flops": sum(r["result"].cost["flops"] for r in rs)}  # fmt: skip
    base_cost, start_cost = cost_of(base), cost_of(list(starts.values()))
    print("\nadmission (policy: AdmissionPolicy() defaults, judged by the own source; then "
          "judge='mean'; baseline: the planted truth)")  # fmt: skip
    print(f"{'group':15s} {'kind':8s} {'kept':>6s} {'expected':>8s} {'decision':>8s} "
          f"{'own d':>8s} {'spread':>7s} {'|d|/sd':>6s} {'mean d':>8s} {'spread':>7s} "
          f"{'by mean':>7s} {'cpu_s':>6s}")  # fmt: skip
    for r in rows:
        ratio = abs(r["delta_own_bpb"]) / max(r["spread_own_bpb"], 1e-12)
        print(f"{r['group']:15s} {r['kind']:8s} {r['kept_share']:6.1%} {r['expected']:>8s} "
              f"{r['decision']:>8s} {r['delta_own_bpb']:+8.4f} {r['spread_own_bpb']:7.4f} "
              f"{ratio:6.1f} {r['delta_mean_bpb']:+8.4f} {r['spread_mean_bpb']:7.4f} "
              f"{r['mean_decision']:>7s} {r['proxy_cpu_s']:6.0f}")  # fmt: skip
    print(f"shared 'without' arm: {len(seeds)} proxies, {base_cost['cpu_s']:.0f} CPU s, "
          f"{base_cost['flops']:.3g} FLOPs")  # fmt: skip
    print(
        f"shared start proxies: {len(starts)}, {start_cost['cpu_s']:.0f} CPU s, "
        f"{start_cost['flops']:.3g} FLOPs; what cleaning removed from the admitted groups: "
        + ", ".join(f"{g} {c['noise'].risk:.0%}" for g, c in admitted.items())
    )
    return {"policy": dataclasses.asdict(policy), "seeds": list(seeds),
            "probe_share": PROBE_SHARE, "recipe": recipe, "groups": rows,
            "without_arm": base_cost, "start_proxies": start_cost,
            "admitted_noise_risk": {g: c["noise"].risk for g, c in admitted.items()},
            "all_correct": all(r["correct"] for r in rows),
            "correct": sum(r["correct"] for r in rows),
            "all_exceed_spread": all(r["exceeds_spread"] for r in rows),
            "mean_correct": sum(r["mean_correct"] for r in rows),
            "mean_all_exceed_spread": all(r["mean_exceeds_spread"] for r in rows),
            "_runs": runs}  # fmt: skip


def main() -> None:
    global PROXY, LARGE, ADMIT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["admission", "search", "overhead", "all"],
                        default="all")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smoke run: small budgets")
    parser.add_argument("--work", default="/tmp/data_roi", help="work folder (kept, reused)")
    parser.add_argument("--fresh", action="store_true", help="delete --work first")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per proxy")
    parser.add_argument("--ray", action="store_true", help="overhead: also on the Ray executor")
    parser.add_argument("--admit-recipe", default=ADMIT,
                        help="admission: the proxy recipe (default AdmissionConfig's)")  # fmt: skip
    parser.add_argument("--truth-at-scale", action="store_true",
                        help="admission: every group again with the larger recipe (the truth)")  # fmt: skip
    parser.add_argument("--scale-seeds", type=int, default=3,
                        help="--truth-at-scale: seeds 0..N-1 of each arm")  # fmt: skip
    parser.add_argument("--candidates", type=int, default=SEARCH_CANDIDATES,
                        help="search: proxies the regression is fitted on")  # fmt: skip
    parser.add_argument("--target", default="mean_bpb",
                        help="search: the target (mean_bpb, bpb:<source>, task_likelihood)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1,
                        help="search: from-scratch runs trained side by side")  # fmt: skip
    parser.add_argument("--groups", default="",
                        help="admission: comma-separated planted groups (default: all)")  # fmt: skip
    args = parser.parse_args()
    env = {**_ENV, "OMP_NUM_THREADS": str(args.threads)}
    if any(os.environ.get(k) != v for k, v in env.items()):  # glibc reads these at start
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **env})
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} is absent (the bench reads its corpus there)")
        print(json.dumps({"bench": "data_roi", "skipped": f"{SHARED} absent"}))
        return
    import torch
    from _roi_search import search_part

    torch.set_num_threads(args.threads)
    work = Path(args.work) / ("quick" if args.quick else "full")
    if args.fresh:
        shutil.rmtree(work, ignore_errors=True)
    ADMIT = args.admit_recipe
    if args.quick:
        PROXY, LARGE, ADMIT = quick_recipes()
    started, load = time.perf_counter(), os.getloadavg()
    setup = build_setup(work)
    print(
        f"setup: {len(setup.pools)} pools, "
        + ", ".join(
            f"{g} {sum(p.tokens for p in ps):,} tokens" for g, ps in sorted(setup.pools.items())
        )
        + f"; {json.dumps({k: round(v, 1) for k, v in setup.seconds.items()})}",
        flush=True,
    )
    out: dict = {"bench": "data_roi", "quick": args.quick, "threads": args.threads,
                 "seeds": {"corpus": CORPUS_SEED, "basis": BASIS_SEED,
                           "admission": list(ADMISSION_SEEDS), "search": SEARCH_SEED,
                           "large": list(LARGE_SEEDS)}}  # fmt: skip
    if args.part in ("admission", "all"):
        groups = sorted(setup.corpus.planted)
        if args.groups:
            unknown = set(args.groups.split(",")) - set(groups)
            if unknown:
                parser.error(f"--groups: unknown {sorted(unknown)}; planted: {groups}")
            groups = sorted(args.groups.split(","))
        seeds = ADMISSION_SEEDS[:2] if args.quick else ADMISSION_SEEDS
        out["admission"] = admission_part(setup, seeds, groups)
        out["admission"].pop("_runs")
        if args.truth_at_scale:
            rows = out["admission"]["groups"]
            scale_seeds = tuple(range(args.scale_seeds))
            out["admission"]["at_scale"] = truth_at_scale(
                setup, rows, scale_seeds, prefetcher(setup, args.jobs, args.threads, args.quick)
            )
            for field in ("correct_at_scale", "mean_correct_at_scale"):
                settled = [r[field] for r in rows if r[field] is not None]
                out["admission"][field] = f"{sum(settled)} of {len(settled)} settled"
    if args.part in ("search", "all"):
        out["search"] = search_part(setup, run, quick=args.quick, proxy=PROXY, large=LARGE,
                                    candidates=args.candidates, extra=RANK_EXTRA,
                                    search_seed=SEARCH_SEED, large_seeds=LARGE_SEEDS,
                                    target=args.target,
                                    prefetch=prefetcher(setup, args.jobs, args.threads,
                                                        args.quick))  # fmt: skip
        out["search"].pop("_runs")
    if args.part in ("overhead", "all"):
        from _roi_dagster import dagster_overhead, in_process_overhead

        runs = saved_runs(setup)  # every proxy of the work folder, this invocation's or not
        out["overhead"] = {"in_process": in_process_overhead(runs, large=LARGE)}
        basis = {"vocab_size": VOCAB, "val_fraction": 0.15, "seed": BASIS_SEED}
        out["overhead"].update(
            dagster_overhead(setup, proxy=OVERHEAD_PROXY, ray=args.ray, basis=basis)
        )
    out["wall_s"] = round(time.perf_counter() - started, 1)
    out["load_average"] = {"start": [round(x, 2) for x in load],
                           "end": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
