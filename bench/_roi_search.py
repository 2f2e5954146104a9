"""The mixture-search part of ``bench/data_roi.py``: RegMix on proxies, then the searched,
natural and uniform mixtures (and a few search candidates) in larger runs at equal tokens.

    out = search_part(setup, run, quick=False, proxy="proxy_cpu", large="proxy_cpu_large",
                      candidates=16, extra=3, search_seed=0, large_seeds=(0, 1, 2),
                      target="mean_bpb", prefetch=None)

The larger runs are the same trainer on views of the same pools with another recipe; every run
is scored on the same validation set. With an anneal proxy recipe every candidate continues the
start proxy of its seed (trained on the natural mixture), and the search's FLOPs include it.
The search also trains its anchors (natural, uniform: ``SearchConfig.anchors``) and proposes
as the library does, verification included (the regression's proposal as a proxy, taken only
when it measures better than every mixture before it); when the verification keeps a measured
mixture, the regression's own proposal runs at the larger scale too (``regression``), to show
what it turned down. ``prefetch`` trains the from-scratch runs (larger runs, anneal starts)
ahead, several at a time. The searched mixture wins when its mean over seeds beats
each baseline's by more than the larger of the two seed standard deviations (the paired
per-seed differences are reported too). Rank agreement: Spearman between the proxy-scale and
the larger-scale target of every mixture trained at both (means over the seeds each has).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence


def _stats(values: Sequence[float]) -> dict:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1
            else 0.0, "n": len(values), "values": list(values)}  # fmt: skip


def _vs(searched: dict, baseline: dict) -> dict:
    """Searched against a baseline: margin (positive: searched is lower), the seed spread it
    must exceed, and the paired per-seed differences."""
    margin = baseline["mean"] - searched["mean"]
    spread = max(searched["sd"], baseline["sd"])
    paired = [b - s for s, b in zip(searched["values"], baseline["values"], strict=False)]
    return {"margin": margin, "spread": spread, "wins": margin > spread,
            "paired": _stats(paired) if paired else None}  # fmt: skip


def _same_share_controls(target: str, searched: dict, natural: dict) -> dict[str, dict]:
    """For a one-source target (``bpb:<source>``): the searched mixture's share of that source
    with the rest natural, and with the rest uniform. They tell what the search found about
    the other sources from what "more of the target source" alone buys."""
    if not target.startswith("bpb:") or target[4:] not in searched:
        return {}
    source, share = target[4:], searched[target[4:]]
    others = [s for s in natural if s != source]
    rest = sum(natural[s] for s in others)
    return {
        f"{source}_share_natural_rest": {source: share, **{s: (1 - share) * natural[s] / rest
                                                           for s in others}},
        f"{source}_share_uniform_rest": {source: share, **{s: (1 - share) / len(others)
                                                           for s in others}},
    }  # fmt: skip


def search_part(
    setup, run: Callable, *, quick: bool, proxy: str, large: str, candidates: int,
    extra: int, search_seed: int, large_seeds: Sequence[int], target: str = "mean_bpb",
    prefetch: Callable | None = None,
) -> dict:  # fmt: skip
    from scipy.stats import spearmanr

    from pretrain.experiments import registry
    from pretrain.experiments.config import (
        DataVariant,
        ExperimentSpec,
        experiment_name,
        get_proxy_recipe,
    )
    from pretrain.experiments.search import (
        ANCHORS,
        SearchConfig,
        SearchSpace,
        search_mixtures,
        search_report,
        verify_proposal,
    )

    groups = setup.base_groups
    pools = setup.pools_of(groups)
    seq_len = pools[0].seq_len
    big = get_proxy_recipe(large)
    large_tokens = (
        big.token_budget
        // (big.global_batch_sequences * seq_len)
        * (big.global_batch_sequences * seq_len)
    )
    count = 6 if quick else candidates
    large_seeds = tuple(large_seeds[:2]) if quick else tuple(large_seeds)
    extra = min(extra, count)
    config = SearchConfig(candidates=count, seeds=(0,), recipe=proxy, target=target,
                          target_tokens=large_tokens, seed=search_seed)  # fmt: skip
    space = SearchSpace.from_pools(pools, target_tokens=large_tokens, default_max_epochs=4.0)
    trained = search_mixtures(space, config)  # the candidates, then the anchors
    labels = list(trained)
    drawn = [trained[label] for label in labels if label not in ANCHORS]
    anchors = {label: w for label, w in trained.items() if label in ANCHORS}
    specs = registry.search_specs(config.search_id(), list(trained.values()),
                                  recipe=proxy, seeds=(0,), labels=labels)  # fmt: skip
    print(f"\nsearch: {count} candidates + anchors {list(anchors)} over {list(space.sources)}, "
          f"proxy {proxy}, target {target}, larger runs {large} ({large_tokens:,} tokens)",
          flush=True)  # fmt: skip
    starts: dict[int, dict] = {}  # an anneal proxy's start, per seed (trained on natural weights)

    def start_of(seed: int):
        spec = registry.start_spec(proxy, seed)
        if spec is None:
            return None
        if seed not in starts:
            starts[seed] = run(setup, spec, groups)
        return starts[seed]["result"]

    search_runs = [run(setup, s, groups, base=start_of(s.seed)) for s in specs]
    search_starts = list(starts.values())  # what the search itself trained before its candidates
    targets = [r["result"].target(target) for r in search_runs]
    report = search_report(space, config, list(trained.values()), targets, labels)
    # SearchConfig.verify: the regression's proposal as a proxy before it is taken
    check = registry.search_specs(config.search_id(), [report["regression_proposal"]],
                                  recipe=proxy, seeds=(0,), labels=["proposal"])  # fmt: skip
    verify_runs = [run(setup, s, groups, base=start_of(s.seed)) for s in check]
    report = verify_proposal(
        report, statistics.fmean(r["result"].target(target) for r in verify_runs)
    )
    search_runs_all = [*search_runs, *verify_runs]
    searched = report["proposal"]["weights"]
    uniform = anchors.get("uniform") or {s: 1.0 / len(space.sources) for s in space.sources}
    mixtures: dict[str, dict | None] = {"natural": None, "uniform": uniform, "searched": searched}
    if report["proposal"]["chosen_by"] == "measured":  # what the verification turned down
        mixtures["regression"] = report["regression_proposal"]
    # the other regression's proposal, checked the same way (it is not the search's answer)
    mixtures.update({f"searched_{m}": w for m, w in report["proposals"].items()
                     if m != report["model"]})  # fmt: skip
    controls = _same_share_controls(target, searched, report["natural"])
    mixtures.update(controls)
    mixtures.update({f"c{i:03d}": drawn[i] for i in range(extra)})
    full = [name for name in mixtures if not name.startswith("c")]
    # the searched mixture and its baselines at every seed; the other regression's proposal at
    # three, a search candidate at one (rank agreement only)
    every = ("natural", "uniform", "searched", *controls)
    seeds = {name: tuple(large_seeds) if name in every
             else tuple(large_seeds[:3]) if name in full else tuple(large_seeds[:1])
             for name in mixtures}  # fmt: skip
    proxy_runs: dict[str, list] = {f"c{i:03d}": [search_runs[i]] for i in range(extra)}
    large_runs: dict[str, list] = {}

    def large_spec(name: str, s: int) -> ExperimentSpec:
        variant = DataVariant(weights=mixtures[name])
        return ExperimentSpec(name=experiment_name("scale", variant, s, large), variant=variant,
                              recipe=large, seed=s, label=name)  # fmt: skip

    if prefetch is not None:  # from scratch, so they can train side by side
        ahead = [large_spec(n, s) for n in mixtures for s in seeds[n]]
        ahead += [spec for s in large_seeds if (spec := registry.start_spec(proxy, s))]
        prefetch([(spec, groups) for spec in dict((sp.name, sp) for sp in ahead).values()])
    extra_proxies = []
    for name, weights in mixtures.items():
        variant = DataVariant(weights=weights)
        if name in full:
            proxy_runs[name] = []
            for s in seeds[name]:
                start = registry.start_spec(proxy, s)
                spec = ExperimentSpec(name=experiment_name("mix", variant, s, proxy),
                                      variant=variant, recipe=proxy, seed=s, label=name,
                                      base=start.name if start else "")  # fmt: skip
                proxy_runs[name].append(run(setup, spec, groups, base=start_of(s)))
            extra_proxies += proxy_runs[name]
        large_runs[name] = [run(setup, large_spec(name, s), groups) for s in seeds[name]]
    rows = {}
    for name in mixtures:
        weights = mixtures[name] if mixtures[name] is not None else dict(report["natural"])
        rows[name] = {
            "weights": {k: round(v, 4) for k, v in weights.items()},
            "proxy": _stats([r["result"].target(target) for r in proxy_runs[name]]),
            "large": _stats([r["result"].target(target) for r in large_runs[name]]),
            "large_bpb": {
                s: statistics.fmean(r["result"].bits_per_byte[s] for r in large_runs[name])
                for s in space.sources
            },  # fmt: skip
        }
    # one point per distinct mixture (a proposal the verification turned into an anchor is the same runs)
    names = list(dict((json.dumps(mixtures[n], sort_keys=True), n) for n in mixtures).values())
    rho = spearmanr([rows[n]["proxy"]["mean"] for n in names],
                    [rows[n]["large"]["mean"] for n in names]).statistic  # fmt: skip
    rho_seed0 = spearmanr([rows[n]["proxy"]["values"][0] for n in names],
                          [rows[n]["large"]["values"][0] for n in names]).statistic  # fmt: skip
    search_flops = sum(r["result"].cost["flops"] for r in search_runs_all + search_starts)
    check_starts = [r for r in starts.values() if r not in search_starts]
    check_flops = sum(r["result"].cost["flops"] for r in extra_proxies + check_starts)
    # one entry per run: a proposal equal to an anchor is the same runs
    large_all = list(
        {r["result"].spec["name"]: r for rs in large_runs.values() for r in rs}.values()
    )
    large_flops = sum(r["result"].cost["flops"] for r in large_all)
    one_large = large_all[0]["result"].cost["flops"]
    one_proxy = search_runs[0]["result"].cost["flops"]
    cost = {
        "proxy_flops": one_proxy, "large_flops": one_large,
        "large_over_proxy": one_large / one_proxy,
        "search_proxies": len(search_runs_all), "search_start_proxies": len(search_starts),
        "search_flops": search_flops,
        "large_runs": len(large_all), "large_flops_total": large_flops,
        "share_of_large_runs": search_flops / large_flops,
        "share_with_check_proxies": (search_flops + check_flops) / large_flops,
        "share_of_one_large_run": search_flops / one_large,
        "search_cpu_s": sum(r["cpu_s"] for r in search_runs_all + search_starts),
        "large_cpu_s": sum(r["cpu_s"] for r in large_all),
        "proxy_cpu_s_mean": statistics.fmean(r["cpu_s"] for r in search_runs),
        "proxy_wall_s_mean": statistics.fmean(r["result"].cost["wall_s"] for r in search_runs),
        "large_cpu_s_mean": statistics.fmean(r["cpu_s"] for r in large_all),
    }  # fmt: skip
    out = {
        "target": target, "sources": list(space.sources), "large_tokens": large_tokens,
        "heldout_spearman": report["heldout_spearman"], "model": report["model"],
        "anchors": report["anchors"], "regression_proposal": report["regression_proposal"],
        "proposal": report["proposal"], "proposals": report["proposals"],
        "best_candidate": report["best_candidate"], "mixtures": rows,
        "searched_vs_natural": _vs(rows["searched"]["large"], rows["natural"]["large"]),
        "searched_vs_uniform": _vs(rows["searched"]["large"], rows["uniform"]["large"]),
        "searched_vs_controls": {c: _vs(rows["searched"]["large"], rows[c]["large"])
                                 for c in controls},  # fmt: skip
        "rank_spearman": rho, "rank_spearman_seed0": rho_seed0, "rank_mixtures": names,
        "cost": cost,
        "_runs": [r for r in [*search_runs_all, *extra_proxies, *large_all, *starts.values()]
                  if not r["reused"]],
    }  # fmt: skip
    _print(out)
    return out


def _print(out: dict) -> None:
    sources, target = out["sources"], out["target"]
    print(f"\nregression held-out Spearman: {out['heldout_spearman']} -> {out['model']} proposes")
    print(f"proposal chosen by {out['proposal']['chosen_by']}: {out['proposal']['reason']}")
    print(f"{'mixture':17s} " + " ".join(f"{s:>6s}" for s in sources)
          + f" {'proxy ' + target:>20s} {'larger ' + target:>20s}")  # fmt: skip
    for name, row in out["mixtures"].items():
        p, g = row["proxy"], row["large"]
        print(f"{name:17s} " + " ".join(f"{row['weights'][s]:6.3f}" for s in sources)
              + f" {p['mean']:9.4f} ±{p['sd']:.4f} n{p['n']} {g['mean']:9.4f} ±{g['sd']:.4f} "
              f"n{g['n']}")  # fmt: skip
    versus = {b: out[f"searched_vs_{b}"] for b in ("natural", "uniform")}
    for base, vs in {**versus, **out["searched_vs_controls"]}.items():
        print(f"searched vs {base}: margin {vs['margin']:+.4f} bits/byte, seed spread "
              f"{vs['spread']:.4f} -> {'wins' if vs['wins'] else 'does NOT win'}")  # fmt: skip
    c = out["cost"]
    print(
        f"rank agreement proxy vs larger (Spearman, {len(out['rank_mixtures'])} mixtures): "
        f"{out['rank_spearman']:.2f} (seed 0 only: {out['rank_spearman_seed0']:.2f})"
    )
    print(
        f"FLOPs: one larger run = {c['large_over_proxy']:.1f} proxies; search proxies = "
        f"{c['share_of_large_runs']:.1%} of the {c['large_runs']} larger runs "
        f"({c['share_with_check_proxies']:.1%} with the rank-check proxies), "
        f"{c['share_of_one_large_run']:.0%} of one larger run (RegMix's 2% is per final run)"
    )
