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

1. **admission** -- each planted group decided as the engine decides it: four arms per seed
   (``registry.admission_specs``: without it, with it, with its floor, with the reference of
   its kind; each an anneal of one ``proxy_cpu_admit`` start per seed), the relative value
   between floor and reference on the target of its kind (``AdmissionPolicy()``), its noise
   risk from the real filter stage (``filter_shard`` with ``FilterConfig()``) against the
   admitted groups' own, under two disjoint seed sets (``ADMISSION_SEEDS``, ``SECOND_SEEDS``).
   Baseline: the planted label (harmful: never admitted; helpful: admitted) and the same
   verdict in both seed sets; ``--ladder`` climbs ``next_scale`` for the groups the default
   recipe cannot see. ``--seed-set 1`` / ``2`` trains one seed set only: two processes, one
   per seed set, share no run and can share the work folder; a whole pass after them reuses
   every run. ``--groups`` decides only some groups; ``--admit-recipe`` tries another probe.
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
REFERENCE_MAX_OVERLAP = 0.1  # a reference document sharing more with the yardstick is left out
SECOND_SEEDS = (20, 21, 22)  # a disjoint seed set: a verdict must not flip between the two
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
    from pretrain.experiments.basis import build_basis, held_out_ids
    from pretrain.experiments.pools import build_floor_pool, build_pool

    marker = work / "setup.json"
    import _roi_corpus

    import pretrain.experiments.basis as basis_module

    corpus_code = _roi_corpus.fingerprint().encode()
    setup_code = "".join(inspect.getsource(part) for part in (
        build_setup, kept_documents, basis_config, reference_targets, basis_module))  # fmt: skip
    fingerprint = hashlib.sha256(
        corpus_code
        + setup_code.encode()
        + f"{VOCAB}:{CORPUS_SEED}:{BASIS_SEED}:{REFERENCE_MAX_OVERLAP}".encode()
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
        corpus = Corpus(base=saved["base"], chars=saved["chars"], targets=saved["targets"],
                        references=saved["references"], planted={g: PlantedGroup(**p) for g, p in saved["planted"].items()})  # fmt: skip
        return Setup(work, corpus, _read_pools(work, corpus), saved["basis"], saved["seconds"])
    seconds = {}
    started = time.perf_counter()
    corpus = build_corpus(SHARED, work / "corpus", seed=CORPUS_SEED)
    seconds["corpus"] = time.perf_counter() - started
    started = time.perf_counter()
    kept = kept_documents(work, corpus)
    seconds["filter"] = time.perf_counter() - started
    started = time.perf_counter()
    references = reference_targets(work, corpus)
    config = basis_config(corpus, references)
    admitted = sorted(f"{s}-0000" for s in corpus.base)
    basis = build_basis([kept[g] for g in admitted], str(work / "basis"), config,
                        shard_groups=admitted)  # fmt: skip
    seconds["basis"] = time.perf_counter() - started
    started = time.perf_counter()
    held = held_out_ids(str(work / "basis"))
    tokenizer = str(work / "basis" / "tokenizer")
    for group, documents in sorted(kept.items()):
        pools_dir = str(work / "pools" / group)
        build_pool([documents], tokenizer, pools_dir, group=group, seq_len=config.seq_len,
                   exclude_ids=held)  # fmt: skip
        if group in corpus.planted:  # a group to decide: its floor (its words shuffled) too
            build_floor_pool([documents], tokenizer, pools_dir, group=group,
                             seq_len=config.seq_len, exclude_ids=held)  # fmt: skip
    seconds["pools"] = time.perf_counter() - started
    saved = {"base": corpus.base, "chars": corpus.chars, "basis": basis.as_metadata(),
             "planted": {g: dataclasses.asdict(p) for g, p in corpus.planted.items()},
             "targets": corpus.targets, "references": corpus.references, "seconds": seconds,
             "fingerprint": fingerprint.hexdigest()}  # fmt: skip
    storage.write_json(saved, str(marker))
    return Setup(work, corpus, _read_pools(work, corpus), saved["basis"], seconds)


def basis_config(corpus, references: dict[str, str]):
    """The basis: the proxy tokenizer, 15% of the admitted documents held out, the default
    reserve of each source (the reference arms), one target set of clean text per source (its
    own kind's yardstick), and where a source's reserve is thin, cleaned text of its kind that
    tops it up (``references``: source -> JSONL, all reference)."""
    from pretrain.experiments.basis import BasisConfig
    from pretrain.experiments.yardsticks import TargetSet

    targets = tuple(TargetSet(name=f"clean_{source}", uris=(uri,), kind=source)
                    for source, uri in sorted(corpus.targets.items()))  # fmt: skip
    more = tuple(TargetSet(name=f"{source}_reference", uris=(uri,), kind=source,
                           reference_share=1.0)
                 for source, uri in sorted(references.items()))  # fmt: skip
    return BasisConfig(vocab_size=VOCAB, val_fraction=0.15, seed=BASIS_SEED,
                       targets=targets + more)  # fmt: skip


def reference_targets(work: Path, corpus) -> dict[str, str]:
    """Source -> a JSONL file of what the filter stage kept of the corpus's reference text of
    that source (``_roi_corpus``: references): its English documents (the groups' language)
    that share no more than ``REFERENCE_MAX_OVERLAP`` of their 8-word shingles with the
    yardstick of their kind (Reuters repeats its stories: a copy would be scored on itself)."""
    import json as json_lib

    import pyarrow.parquet as pq
    from _roi_corpus import _write_target, filter_check

    from pretrain.filters.langid import predict

    def shingles(text: str) -> set[str]:
        words = text.split()
        return {" ".join(words[i : i + 8]) for i in range(max(0, len(words) - 7))}

    found = {}
    for source, raw in sorted(corpus.references.items()):
        out = work / "filtered" / f"{source}-reference"
        filter_check(Path(raw), out)
        texts = pq.read_table(out / "documents.parquet", columns=["text"])["text"].to_pylist()
        with open(corpus.targets[source], encoding="utf-8") as f:
            judged = set().union(*(shingles(json_lib.loads(line)["text"]) for line in f))
        kept = [
            text for text, (label, _) in zip(texts, predict(texts), strict=True)
            if label == "en"
            and len(shingles(text) & judged) <= REFERENCE_MAX_OVERLAP * len(shingles(text))
        ]  # fmt: skip
        found[source] = _write_target(kept, work / "references" / f"{source}.jsonl")
    return found


def _read_pools(work: Path, corpus) -> dict:
    """group -> its pools; ``floor:<group>`` -> a planted group's floor; ``reserve:<source>``
    -> the basis's reserve of that source (named as the variants name them)."""
    from pretrain.experiments.pools import floor_dir, read_pool

    pools = {g: read_pool(str(work / "pools" / g)) for g in corpus.chars}
    for group in corpus.planted:
        pools[f"floor:{group}"] = read_pool(floor_dir(str(work / "pools" / group)))
    for pool in read_pool(str(work / "basis" / "reserve")):
        pools[f"reserve:{pool.source}"] = [
            dataclasses.replace(pool, group=f"reserve:{pool.source}")
        ]
    return pools


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
    """Names the validation set and the targets every run is scored on (their packed token
    files): a run is rescored when either changed."""
    return hashlib.sha256(
        "".join(
            _files_digest(str(setup.work / "basis" / part), "val-*.bin")
            for part in ("validation", "targets")
        ).encode()  # fmt: skip
    ).hexdigest()[:16]


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
                    targets_packed_dir=str(setup.work / "basis" / "targets"),
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
        targets_packed_dir=str(setup.work / "basis" / "targets"),
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


def ladder(setup: Setup, found: dict, seeds: tuple[int, ...]) -> list[dict]:
    """Up the recipe ladder (``ProxyRecipe.next_scale``, CPU recipes only) for the groups the
    default recipe cannot see, until none is left: which recipe separates each group's floor
    from its reference, and what a proxy of it costs next to the default's."""
    from pretrain.experiments.config import get_proxy_recipe

    blind = [r["group"] for r in found["groups"] if r["cannot_see"]]
    recipe, steps = found["recipe"], []
    base_cost = _per_proxy(found)
    while blind:
        recipe = get_proxy_recipe(recipe).next_scale or ""
        if not recipe or get_proxy_recipe(recipe).device != "cpu":
            steps.append(
                {"recipe": recipe or None, "still_blind": blind, "note": "no CPU recipe left"}
            )
            break
        part = admission_part(setup, seeds, blind, recipe)
        part.pop("_runs")
        print_admission(part)
        cost = _per_proxy(part) / base_cost if base_cost else None
        steps.append({"recipe": recipe, "groups": part["groups"], "cost_per_proxy_x": cost})
        blind = [r["group"] for r in part["groups"] if r["cannot_see"]]
    return steps


def _per_proxy(part: dict) -> float:
    """FLOPs of one with-arm proxy of ``part`` (the recipe's cost per proxy)."""
    rows = part["groups"]
    return sum(r["with_cost"]["flops"] for r in rows) / max(
        1, sum(r["with_cost"]["proxies"] for r in rows)
    )


def admission_part(setup: Setup, seeds: tuple[int, ...], groups: list[str], recipe: str) -> dict:
    """Every planted group decided as the engine decides it (``AdmissionConfig``'s arms and
    ``AdmissionPolicy()``'s verdict on the target set of its kind), at ``seeds``."""
    from _roi_corpus import filter_check

    from pretrain.experiments import registry
    from pretrain.experiments.admission import (
        AdmissionPolicy,
        admission_evidence,
        corpus_noise,
        decide_admission,
        yardstick_groups,
    )
    from pretrain.experiments.config import get_proxy_recipe
    from pretrain.experiments.corpus import language_shares

    policy = AdmissionPolicy()  # judge="own_source": the target set of the group's kind
    rows, runs = [], []
    base_groups = setup.base_groups

    def arm(specs, start_of) -> list[dict]:
        found = [run(setup, s, registry.variant_groups(base_groups, s.variant),
                     base=start_of.get(s.seed)) for s in specs]  # fmt: skip
        runs.extend(r for r in found if not r["reused"])
        return found

    # the proxies every arm of a seed continues (trained from scratch on the admitted corpus)
    starts = {s.seed: run(setup, s, base_groups) for s in registry.starts_of(recipe, seeds)}
    runs += [r for r in starts.values() if not r["reused"]]
    start_of = {seed: r["result"] for seed, r in starts.items()}
    # the admitted corpus's funnel: what the same filter removes from the admitted groups
    admitted = {g: filter_check(setup.work / "corpus" / g / "documents.parquet",
                                setup.work / "filtered" / g) for g in base_groups}  # fmt: skip
    sources = {g: {setup.corpus.planted[g].source} if g in setup.corpus.planted
               else {g.split("-")[0]} for g in [*admitted, *groups]}  # fmt: skip
    shared: dict[str, list[dict]] = {}
    targets = {f"clean_{k}": k for k in setup.corpus.targets}
    yardsticks = {k: {**v, "warnings": setup.basis_stats.get("warnings", {}).get(k, [])}
                  for k, v in setup.basis_stats.get("yardsticks", {}).items()}  # fmt: skip
    for group in groups:
        planted = setup.corpus.planted[group]
        check = filter_check(Path(planted.path), setup.work / "filtered" / group)
        shares = language_shares(str(setup.work / "filtered" / group / "documents.parquet"))
        language = "code" if planted.source == "code" else "en"  # what the targets are in
        arms = registry.admission_specs(group, recipe=recipe, seeds=seeds,
                                        probe_share=PROBE_SHARE, kind=planted.source)  # fmt: skip
        base = shared.setdefault("without", arm(arms.without, start_of))
        reference = shared.setdefault(planted.source, arm(arms.reference, start_of))
        with_, floor = arm(arms.with_, start_of), arm(arms.floor, start_of)
        evidence = admission_evidence(
            group=group, with_runs=[r["result"] for r in with_],
            without_runs=[r["result"] for r in base], floor_runs=[r["result"] for r in floor],
            reference_runs=[r["result"] for r in reference], sources=sources[group],
            kind=planted.source, language=language, language_share=shares.get(language),
            targets=targets, yardsticks=yardsticks,
            reserve_tokens=setup.basis_stats.get("reserve", {}).get(planted.source),
            reference_from=setup.basis_stats.get("reserve_from", {}).get(planted.source, []),
        )  # fmt: skip
        corpus = corpus_noise([admitted[g]["noise"]
                               for g in yardstick_groups(group, sources, list(admitted))])  # fmt: skip
        decision = decide_admission(evidence, noise=check["noise"], cost=check["cost"],
                                    policy=policy, corpus=corpus,
                                    next_recipe=get_proxy_recipe(recipe).next_scale)  # fmt: skip
        value = decision.relative
        own = decide_admission(evidence, noise=check["noise"], cost=check["cost"],
                               policy=dataclasses.replace(policy, judge=f"bpb:{planted.source}"),
                               corpus=corpus)  # fmt: skip
        rows.append({
            "group": group, "kind": planted.kind, "how": planted.how, "source": planted.source,
            "decision": decision.decision, "cannot_see": decision.cannot_see,
            "verdict": "cannot see" if decision.cannot_see else decision.decision,
            "reason": decision.reason, "yardstick": decision.yardstick,
            "relative_value": value.value if value else None,
            "relative_spread": value.spread if value else None,
            "group_change": value.group_change if value else None,
            "floor_change": value.floor_change if value else None,
            "reference_change": value.reference_change if value else None,
            "separation": value.separation if value else None,
            "separation_spread": value.separation_spread if value else None,
            "absolute_change_own_validation": evidence.delta_bpb.get(planted.source),
            "verdict_on_own_validation": "cannot see" if own.cannot_see else own.decision,
            "warnings_own_validation": own.warnings, "warnings": decision.warnings,
            "language_share": evidence.language_share,
            "reserve_tokens": evidence.reserve_tokens,
            "reference_epochs": evidence.reference_epochs,
            "kept_share": check["kept_share"], "noise_risk": check["noise"].risk,
            "with_cost": _cost(with_), "floor_cost": _cost(floor),
        })  # fmt: skip
    return {"policy": dataclasses.asdict(policy), "seeds": list(seeds), "recipe": recipe,
            "probe_share": PROBE_SHARE, "groups": rows,
            "without_arm": _cost(shared["without"]),
            "reference_arms": {k: _cost(v) for k, v in shared.items() if k != "without"},
            "start_proxies": _cost(list(starts.values())), "_runs": runs}  # fmt: skip


def _cost(runs: list[dict]) -> dict:
    return {"proxies": len(runs), "wall_s": sum(r["result"].cost["wall_s"] for r in runs),
            "cpu_s": sum(r.get("cpu_s", 0.0) for r in runs),
            "flops": sum(r["result"].cost["flops"] for r in runs)}  # fmt: skip


def print_admission(found: dict) -> None:
    print(f"\nadmission, recipe {found['recipe']}, seeds {found['seeds']} (AdmissionPolicy() "
          "defaults: judged on the target set of the group's kind)")  # fmt: skip
    print(f"{'group':15s} {'planted':8s} {'verdict':>11s} {'value':>6s} {'± sd':>5s} "
          f"{'group d':>8s} {'floor d':>8s} {'ref d':>8s} {'sep/sd':>6s} | own-validation: "
          f"{'d':>8s} {'verdict':>11s}")  # fmt: skip
    for r in found["groups"]:
        sep = (r["separation"] or 0) / max(r["separation_spread"] or 0, 1e-12)
        print(f"{r['group']:15s} {r['kind']:8s} {r['verdict']:>11s} "
              f"{_num(r['relative_value'], '6.2f')} {_num(r['relative_spread'], '5.2f')} "
              f"{_num(r['group_change'], '+8.4f')} {_num(r['floor_change'], '+8.4f')} "
              f"{_num(r['reference_change'], '+8.4f')} {sep:6.1f} | "
              f"{_num(r['absolute_change_own_validation'], '+8.4f')} "
              f"{r['verdict_on_own_validation']:>11s}")  # fmt: skip


def _num(value, spec: str) -> str:
    return format(value, spec) if value is not None else "-".rjust(len(format(0.0, spec)))


def admission_summary(first: dict, second: dict) -> dict:
    """The targets of the issue over two disjoint seed sets: no harmful group admitted, every
    helpful one admitted, the same verdict under both sets; and what the arms cost."""
    rows = {r["group"]: r for r in first["groups"]}
    again = {r["group"]: r for r in second["groups"]}
    harmful_admitted = [g for g, r in rows.items() if r["kind"] == "harmful"
                        and "admit" in (r["verdict"], again[g]["verdict"])]  # fmt: skip
    helpful_missed = [g for g, r in rows.items() if r["kind"] == "helpful"
                      and not r["verdict"] == again[g]["verdict"] == "admit"]  # fmt: skip
    flipped = [g for g in rows if rows[g]["verdict"] != again[g]["verdict"]]
    with_flops = sum(r["with_cost"]["flops"] for r in first["groups"])
    floor_flops = sum(r["floor_cost"]["flops"] for r in first["groups"])
    reference_flops = sum(c["flops"] for c in first["reference_arms"].values())
    groups = len(rows)
    today = with_flops / groups  # a group's own proxies before: its with arm
    now = (with_flops + floor_flops + reference_flops) / groups  # the reference shared by kind
    return {
        "harmful_admitted": harmful_admitted, "helpful_not_admitted": helpful_missed,
        "flipped_between_seed_sets": flipped,
        "per_group_cost_ratio": now / today if today else None,
        "per_group_flops": {"today": today, "now": now},
        "met": not harmful_admitted and not helpful_missed and not flipped,
    }  # fmt: skip


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
    parser.add_argument("--ladder", action="store_true",
                        help="admission: the next recipes for the groups it cannot see")  # fmt: skip
    parser.add_argument("--candidates", type=int, default=SEARCH_CANDIDATES,
                        help="search: proxies the regression is fitted on")  # fmt: skip
    parser.add_argument("--target", default="mean_bpb",
                        help="search: the target (mean_bpb, bpb:<source>, task_likelihood)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1,
                        help="search: from-scratch runs trained side by side")  # fmt: skip
    parser.add_argument("--groups", default="",
                        help="admission: comma-separated planted groups (default: all)")  # fmt: skip
    parser.add_argument("--seed-set", type=int, choices=[1, 2], default=0,
                        help="admission: train one seed set only (two processes, one each, "
                        "share a work folder; a whole pass then reuses their runs)")  # fmt: skip
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
        seed_sets = [ADMISSION_SEEDS[:2], SECOND_SEEDS[:2]] if args.quick else [
            ADMISSION_SEEDS, SECOND_SEEDS]  # fmt: skip
        if args.seed_set:  # one seed set only: its runs, for a later whole pass to reuse
            part = admission_part(setup, seed_sets[args.seed_set - 1], groups, ADMIT)
            part.pop("_runs")
            print_admission(part)
            print(json.dumps({"bench": "data_roi", "seed_set": args.seed_set, "admission": part},
                             default=str))  # fmt: skip
            return
        found = [admission_part(setup, seeds, groups, ADMIT) for seeds in seed_sets]
        for part in found:
            print_admission(part)
            part.pop("_runs")
        out["admission"] = {"first": found[0], "second": found[1],
                            "summary": admission_summary(*found)}  # fmt: skip
        print(json.dumps({"admission_summary": out["admission"]["summary"]}))
        if args.ladder:  # the next recipes, for the groups the default recipe cannot see
            out["admission"]["ladder"] = ladder(setup, found[0], seed_sets[0])
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
