"""``pretrain experiments``: list, show and compare experiments; register and launch them.

    pretrain experiments list [--kind search] [--group search-1a2b3c4d]
    pretrain experiments show mix-0a1b2c3d-s0
    pretrain experiments compare admit-with-…-s0 admit-base-…-s0     # per-source bits per byte
    pretrain experiments compare --group web-0007                       # arms: mean ± spread
    pretrain experiments add my-mix --weights '{"web": 0.5, "news": 0.5}' --seeds 0 1
    pretrain experiments search --search.candidates 32 --search.target mean_bpb
    pretrain experiments admit forum-0007 [--admission.seeds '[0, 1, 2]']
    pretrain experiments ablate quality --arm '{}' --arm '{"min_quality_score": 0.5}'

``list``, ``show`` and ``compare`` read the artifact root (``--root`` before or after the
subcommand); a spec or result they cannot read is skipped with a one-line warning. ``add``,
``admit`` and ``ablate`` register specs and ``experiments`` partitions in the instance of
``DAGSTER_HOME`` and launch the partitions not run yet as one backfill of ``proxy_runs`` (the
daemon runs it: ``make ui``); ``search`` does the same for a mixture search's candidates, as
the ``launch_search`` job does (more than ``--search.confirm_above`` proxies only with
``--yes``). ``--no-launch`` registers only. Arguments are checked before anything is
registered: JSON that is not the object an option takes, weights that are not finite and
non-negative, a negative seed, and a shard group, source or filter setting the root does not
have are each one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from typing import Any

from app.user_errors import warning_printer
from pretrain.errors import ConfigError

COLUMNS = ("name", "kind", "group", "label", "recipe", "seed", "mean bpb", "GFLOPs", "wall s")


def _root(args: argparse.Namespace) -> str:
    return args.root


_warn = warning_printer("experiments")


def json_object(text: str, option: str, example: str) -> dict[str, Any]:
    """The JSON object ``text`` given to ``option``; a ``ConfigError`` that says what is expected
    when it is not JSON or not an object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{option} takes a JSON object, e.g. {example}; got {text!r:.60} ({exc})"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{option} takes a JSON object, e.g. {example}; got a JSON {type(value).__name__}: "
            f"{text!r:.60}"
        )
    return value


def _row(spec: Any, result: Any) -> list[str]:
    done = result is not None
    return [
        spec.name, spec.kind, spec.group or "-", spec.label or "-", spec.recipe, str(spec.seed),
        f"{result.mean_bits_per_byte:.4f}" if done else "not run",
        f"{result.cost['flops'] / 1e9:,.1f}" if done else "-",
        f"{result.cost['wall_s']:.1f}" if done else "-",
    ]  # fmt: skip


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    from pretrain.experiments import registry

    specs = [
        s for s in registry.list_specs(_root(args), warn=_warn)
        if (args.kind is None or s.kind == args.kind) and (args.group is None or s.group == args.group)
    ]  # fmt: skip
    found = registry.results(_root(args), [s.name for s in specs], warn=_warn)
    if not specs:
        print(f"no experiments registered under {_root(args)}")
        return 0
    print(_table([_row(s, found.get(s.name)) for s in specs], COLUMNS))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from pretrain.experiments import registry

    spec = registry.load_spec(_root(args), args.name)
    print(spec.to_json())
    from pretrain import identity

    where = registry.result_dir(_root(args), args.name)
    result = registry.read_result(where)
    if result is None:
        print("not run yet")
        return 0
    if not identity.is_current(where):
        print("its result does not count: the run was interrupted or is being redone, or its "
              "inputs changed since (materialize it again)")  # fmt: skip
    print(json.dumps({k: v for k, v in result.to_dict().items() if k != "loss_curve"}, indent=2))
    return 0


def _spread(values: Sequence[float]) -> str:
    """``mean ± std`` over the finite values (``n/a`` when none is)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "n/a"
    mean = statistics.fmean(finite)
    if len(finite) == 1:
        return f"{mean:.4f}"
    return f"{mean:.4f} ± {statistics.stdev(finite):.4f}"


def cmd_compare(args: argparse.Namespace) -> int:
    from pretrain.experiments import registry

    root = _root(args)
    decision = _decision(root, args.group) if args.group else None
    if decision is not None:  # the arms the decision read, by arm
        arms = {arm: list(names) for arm, names in decision["evidence"]["experiments"].items()}
    elif args.group:
        every = registry.list_specs(root, warn=_warn)
        specs = [s for s in every if s.group == args.group]
        seeds = {s.seed for s in specs if s.kind == "admission"}
        # an admission's without and reference arms name no group: they are shared
        specs += [
            s for s in every
            if s.kind == "admission" and s.label in ("base", "reference") and s.seed in seeds
        ]  # fmt: skip
        arms = {}
        for s in specs:
            arms.setdefault(s.label or s.name, []).append(s.name)
    else:
        arms = {name: [name] for name in args.names}
    found = registry.results(root, [n for names in arms.values() for n in names], warn=_warn)
    sources = sorted({k for r in found.values() for k in r.bits_per_byte if k != "overall"})
    targets = sorted({t for r in found.values() for t in r.targets})
    header = ["arm", "runs", *sources, *(f"target:{t}" for t in targets), "mean bpb",
              "task P(correct)"]  # fmt: skip
    rows = []
    for arm, names in arms.items():
        runs = [found[n] for n in names if n in found]
        if not runs:
            rows.append([arm, "0", *(["not run"] * (len(header) - 2))])
            continue
        rows.append(
            [arm, str(len(runs))]
            + [_spread([r.bits_per_byte[s] for r in runs]) for s in sources]
            + [_spread([r.targets.get(t, float("nan")) for r in runs]) for t in targets]
            + [_spread([r.mean_bits_per_byte for r in runs])]
            + [_spread([r.task_likelihood() for r in runs])]
        )
    print(_table(rows, header))
    if decision is not None:
        print(verdict_line(decision))
        for warning in decision.get("warnings", []):
            print(f"warning: {warning}")
    return 0


def _decision(root: str, group: str) -> dict[str, Any] | None:
    """The group's ``decision.json`` (None before its admission was decided)."""
    from pretrain import storage
    from pretrain.experiments.decisions import DECISION_FILE, decision_record
    from pretrain.experiments.records import read_record

    where = storage.join(root, "data_admission", group, DECISION_FILE)
    if not storage.exists(where):
        return None
    return read_record(where, decision_record, "an admission decision")


def verdict_line(decision: dict[str, Any]) -> str:
    """One line: the decision, on which yardstick, the relative value or "cannot see", and who
    decided (an operator's review overrides the policy)."""
    value = decision.get("relative") or {}
    if decision.get("cannot_see"):
        shown = (
            "the proxies cannot separate clean from damaged text: try "
            f"{decision.get('next_recipe') or 'a larger recipe'}"
        )
    elif value:
        shown = (
            f"relative value {value['value']:.2f} ± {value['spread']:.2f} (floor 0, reference 1)"
        )
    else:
        shown = "no relative value (no reference of its kind)"
    return (
        f"decision: {decision['decision']} on {decision.get('yardstick', 'mean')}, {shown}; "
        f"decided by {decision.get('decided_by', 'policy')} (the policy: "
        f"{decision.get('policy_decision', decision['decision'])})"
    )


def _instance_and_store(args: argparse.Namespace) -> tuple[Any, Any]:
    from dagster import DagsterInstance

    from resources.storage import ArtifactStore

    return DagsterInstance.get(), ArtifactStore(root=_root(args))


def _launch(args: argparse.Namespace, specs: Sequence[Any], title: str) -> int:
    """Register ``specs`` and launch the ones not run yet as one backfill; returns how many
    were not run yet."""
    from dagster import AssetKey

    from foundation.backfills import launch_asset_backfill
    from foundation.experiment_launches import not_run, register_experiments
    from foundation.partitions import experiment_partitions

    instance, store = _instance_and_store(args)
    names = register_experiments(instance, store, specs)
    todo = not_run(store, names)
    print(f"{len(names)} experiments registered ({len(todo)} not run yet)")
    if todo and not args.no_launch:
        backfill = launch_asset_backfill(
            instance, AssetKey("proxy_runs"), experiment_partitions, todo, tags={}, title=title
        )
        print(f"backfill {backfill}: the daemon runs it (make ui)")
    return len(todo)


def cmd_add(args: argparse.Namespace) -> int:
    from foundation.experiments import experiment_root
    from pretrain.experiments.config import DataVariant, ExperimentSpec

    weights = '\'{"web": 0.5, "news": 0.5}\''
    variant = DataVariant(
        weights=json_object(args.weights, "--weights", weights) if args.weights else None,
        include_groups=tuple(args.include or ()),
        exclude_groups=tuple(args.exclude or ()),
        filter=json_object(args.filter, "--filter", FILTER_EXAMPLE) if args.filter else {},
    )
    specs = [
        ExperimentSpec(
            name=f"{args.name}-s{s}",
            variant=variant,
            recipe=args.recipe,
            seed=s,
            group=args.name,
            label="manual",
        )  # fmt: skip
        for s in args.seeds
    ]
    experiment_root(*_instance_and_store(args)).check_variant(variant)  # before registering
    _launch(args, specs, args.name)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from foundation.config import build
    from foundation.experiment_launches import launch_search, record_search
    from foundation.experiments import experiment_root
    from foundation.stages import stage_settings
    from pretrain.experiments.search import SearchConfig

    config = build(SearchConfig, stage_settings(args).get("search", {}))
    if config.proxies() > config.confirm_above and not (args.yes or args.no_launch):
        raise ConfigError(
            f"this search trains up to {config.proxies():,} proxies ({config.candidates} "
            f"candidates and {len(config.anchors)} anchors x {len(config.seeds)} seeds), more "
            f"than --search.confirm_above={config.confirm_above}: add --yes to launch them, or "
            "--no-launch to register them only"
        )
    instance, store = _instance_and_store(args)
    root = experiment_root(instance, store)
    if not root.has_basis() and not _skip_reason(root, config):
        root.basis()  # an empty root, or one to search: say what to materialize first
    launched = launch_search(instance, store, config, launch=not args.no_launch)
    if launched.get("skipped"):  # nothing launched: data_mixture keeps the configured weights
        print(f"mixture search skipped: {launched['skipped']}; nothing launched, and "
              "data_mixture with weights_from: searched takes the configured weights")  # fmt: skip
        return 0
    if not args.no_launch:  # the sensor runs and fits launched searches only
        record_search(store, config, launched)
    print(json.dumps({k: v for k, v in launched.items() if k not in ("names", "starts")}))
    return 0


def _skip_reason(root: Any, config: Any) -> str | None:
    """Why a search over ``root`` cannot run (one source), or None; None too when its groups'
    documents cannot be read (then the missing basis is what to say)."""
    from pretrain.errors import DataError
    from pretrain.experiments.evidence import search_skipped

    try:
        return search_skipped(root, config) if root.groups else None
    except DataError:
        return None


def cmd_admit(args: argparse.Namespace) -> int:
    from foundation.config import build
    from foundation.experiments import experiment_root
    from foundation.stages import stage_settings
    from pretrain.experiments import registry
    from pretrain.experiments.admission import AdmissionConfig
    from pretrain.experiments.evidence import admission_arms

    config = build(AdmissionConfig, stage_settings(args).get("admission", {}))
    root = experiment_root(*_instance_and_store(args))
    root.check_group(args.group)
    arms = admission_arms(root, args.group, config)
    if not arms.reference:
        print(f"no reserve of clean {root.kind(args.group) or 'data of its kind'} in the "
              "basis: the decision will hold it for review (give a target set of its kind)")  # fmt: skip
    starts = registry.starts_of(config.recipe, config.seeds)
    if starts and _launch(args, starts, f"admission of {args.group}: the shared proxies"):
        print("the arms continue those proxies: run this again once they are done "
              "(experiment_sensor launches them by itself)")  # fmt: skip
        return 0
    _launch(args, arms.all(), f"admission of {args.group}")
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    from dagster import AssetKey

    from foundation.backfills import launch_asset_backfill
    from foundation.experiment_launches import register_experiments
    from foundation.experiments import experiment_root
    from foundation.partitions import ABLATION_PARTITIONS_NAME, ablation_partitions
    from pretrain.experiments import registry
    from pretrain.experiments.ablation import with_overrides
    from pretrain.experiments.corpus import ablation_arms, ablation_key, register_ablation
    from pretrain.filters.config import FilterConfig

    arms = [json_object(a, "--arm", FILTER_EXAMPLE) for a in args.arm]
    for arm in arms:
        with_overrides(FilterConfig(), arm)  # an unknown setting: a ConfigError naming it
    specs = registry.ablation_specs(args.name, arms, recipe=args.recipe, seeds=args.seeds)
    instance, store = _instance_and_store(args)
    root = experiment_root(instance, store)
    root.basis()  # an empty root: say what to materialize first
    variants = {s.variant.digest(): s.variant for s in specs}
    for digest, variant in variants.items():
        names = [s.name for s in specs if s.variant.digest() == digest]
        register_ablation(store.root, variant, names)
    waiting = [a.key for a in ablation_arms(root) if a.key in
               {ablation_key(v) for v in variants.values()} and not a.ready]  # fmt: skip
    if waiting:
        register_experiments(instance, store, specs)
        instance.add_dynamic_partitions(ABLATION_PARTITIONS_NAME, waiting)
        print(f"{len(waiting)} filter arms to pool first (ablation_pools)")
        if not args.no_launch:
            backfill = launch_asset_backfill(
                instance, AssetKey("ablation_pools"), ablation_partitions, waiting, tags={},
                title=f"ablation {args.name}: pools",
            )  # fmt: skip
            print(f"backfill {backfill}: the daemon runs it; experiment_sensor then trains the "
                  "arms (or run this again once the pools are made)")  # fmt: skip
        return 0
    _launch(args, specs, f"ablation {args.name}")
    return 0


def experiment_flops(root: str) -> float:
    """FLOPs of every proxy run under ``root`` (for ``pretrain plan``)."""
    from pretrain.experiments import registry

    warn = warning_printer("plan")
    specs = registry.list_specs(root, warn=warn)
    found = registry.results(root, [s.name for s in specs], warn=warn)
    return sum(r.cost["flops"] for r in found.values())


FILTER_EXAMPLE = "'{\"min_quality_score\": 0.5}'"


def add_experiments_parser(sub: Any, root: str, *, options: bool = True) -> None:
    """The ``experiments`` commands; ``options=False`` leaves out the stage options of
    ``search`` and ``admit`` (they import Dagster: another command does not pay for them)."""
    from pretrain.experiments.config import KINDS

    exp = sub.add_parser("experiments", help="proxy experiments: list, show, compare, launch")
    exp.add_argument("--root", default=root, help=f"artifact root (default: {root})")
    cmds = exp.add_subparsers(dest="experiments_command", required=True)

    def command(name: str, func: Any, helptext: str) -> argparse.ArgumentParser:
        p = cmds.add_parser(name, help=helptext, formatter_class=DefaultsHelp)
        # also after the subcommand (`experiments list --root R`); unset, the one before holds
        p.add_argument(
            "--root", default=argparse.SUPPRESS,
            help=f"artifact root, also before the subcommand (default: {root})",
        )  # fmt: skip
        p.set_defaults(func=func)
        return p

    ls = command("list", cmd_list, "every registered experiment and its result")
    ls.add_argument("--kind", choices=list(KINDS), help="only experiments of this kind")
    ls.add_argument("--group", help="only those of a search id, a shard group or an ablation")
    show = command("show", cmd_show, "one experiment's spec and result")
    show.add_argument("name", help="the experiment (a proxy_runs partition key)")
    cmp = command("compare", cmd_compare, "bits per byte per source side by side")
    cmp.add_argument("names", nargs="*", help="experiments to compare, one column each")
    cmp.add_argument("--group", help="compare the arms of a group (mean ± spread over seeds)")
    for name, func, helptext in (
        ("add", cmd_add, "register (and launch) a data variant"),
        ("search", cmd_search, "launch a mixture search's candidates as one backfill"),
        ("admit", cmd_admit, "launch a shard group's admission experiments"),
        ("ablate", cmd_ablate, "launch a filter ablation (one arm per --arm)"),
    ):
        p = command(name, func, helptext)
        p.add_argument(
            "--no-launch", action="store_true", help="register the experiments, launch nothing"
        )
        if name == "add":
            p.add_argument("name", help="the variant's name; its experiments are <name>-s<seed>")
            p.add_argument(
                "--weights", help='source weights, a JSON object: \'{"web": 0.5, "news": 0.5}\''
            )
            p.add_argument("--include", nargs="*", help="shard groups to add to the admitted ones")
            p.add_argument("--exclude", nargs="*", help="shard groups to leave out")
            p.add_argument("--filter", help=f"filter overrides, a JSON object: {FILTER_EXAMPLE}")
        if name in ("add", "ablate"):
            p.add_argument("--recipe", default="proxy_cpu", help="the proxy recipe")
            p.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="one proxy each")
        if name == "ablate":
            p.add_argument("name", help="the ablation's name (the group of its experiments)")
            p.add_argument(
                "--arm", action="append", required=True,
                help=f"one arm's filter overrides, a JSON object ('{{}}': the campaign's): {FILTER_EXAMPLE}",
            )  # fmt: skip
        if name == "search":
            p.add_argument(
                "--yes", action="store_true",
                help="launch a search of more than --search.confirm_above proxies",
            )  # fmt: skip
            if options:
                add_stage_options(p, ("search",))
        if name == "admit":
            p.add_argument("group", help="the shard group to try (it needs deduplicated documents)")
            if options:
                add_stage_options(p, ("admission",))


def add_stage_options(parser: argparse.ArgumentParser, stages: tuple[str, ...]) -> None:
    """The stages' ``--<stage>.<field>`` options (imported here: they need Dagster)."""
    from foundation.stages import add_stage_options as add

    add(parser, stages)


class DefaultsHelp(argparse.HelpFormatter):
    """Help that shows each option's default after its own line (the stage options say theirs
    themselves, from the library dataclass)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.dest.startswith("setting:") or action.dest == "help":
            return text  # a positional (needed), or a stage option (its help has its default)
        if action.nargs == 0 and action.default is False:  # a flag
            return f"{text} (default: off)"
        if action.default not in (None, argparse.SUPPRESS):
            return f"{text} (default: %(default)s)"
        return text
