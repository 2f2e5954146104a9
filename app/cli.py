"""``pretrain``: the command line of the product.

    pretrain plan --gpu h100 --gpus 256 --days 14          # compute plan for a budget
    pretrain plan --params 7e9 --tokens 2e12 --gpu a100    # cost of a given model
    pretrain demo [demo options]                           # same as `make demo`
    pretrain data --source DIR [--source-name web]         # ingest → filter → dedup → mixture
    pretrain data --source DIR --filter.heuristics.min_words 20   # any data-stage setting
    pretrain status [--root DIR] [--sizes-only]            # checkpoints, decisions, quarantine
    pretrain evals fetch                                   # eval tasks from the Hugging Face Hub
    pretrain export CHECKPOINT_KEY OUT [--dtype bf16]      # topology-free export
    pretrain experiments list|show|compare|add|search|admit|ablate   # proxy experiments

``status`` reads the artifact store (checkpoints, each verified against its commit record —
a damaged one is marked DAMAGED and never shown as the latest — and their health labels; the
quarantine: each decision's documents and review status, and per source its share of the
quarantined tokens vs of the mixture) and, when ``DAGSTER_HOME`` holds an instance, the recovery
decisions recorded as run tags (a tag that is not a decision is skipped with a warning). A user
error (``ConfigError``, ``DataError``, ``CheckpointError``) is one line on stderr and exit 1.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from app.experiments_cli import (
    add_experiments_parser,
    add_stage_options,
    experiment_flops,
)
from app.source_options import add_data_options
from app.user_errors import report_user_errors


def cmd_plan(args: argparse.Namespace) -> int:
    from pretrain.scaling import ComputeBudget, plan_for_model, plan_from_budget

    if args.params:
        plan = plan_for_model(
            num_params=args.params, tokens=args.tokens, gpu=args.gpu, mfu=args.mfu,
            dollars_per_gpu_hour=args.price,
        )  # fmt: skip
        print(
            f"{plan.num_params:.3g} params on {plan.tokens:.3g} tokens: {plan.flops:.3g} FLOPs, "
            f"{plan.gpu_hours:,.0f} {args.gpu.upper()}-hours at MFU {args.mfu:.0%}, "
            f"${plan.cost_dollars:,.0f}; nearest recipe {plan.recipe}"
        )
        _experiments_share(args.root, plan.flops)
        return 0
    budget = ComputeBudget(
        gpu=args.gpu, num_gpus=args.gpus, days=args.days, dollars_per_gpu_hour=args.price,
        mfu=args.mfu,
    )  # fmt: skip
    scaling = plan_from_budget(budget)
    print(scaling.markdown())
    _experiments_share(args.root, scaling.chinchilla.flops)
    return 0


def _experiments_share(root: str, training_flops: float) -> None:
    """The proxy experiments' share of the campaign's FLOPs (training run + experiments)."""
    spent = experiment_flops(root)
    if spent:
        total = training_flops + spent
        print(
            f"proxy experiments under {root}: {spent:.3g} FLOPs = {spent / total:.2%} of the "
            f"campaign's {total:.3g} (the planned run plus the experiments)"
        )


def cmd_demo(args: argparse.Namespace) -> int:
    from app import demo

    demo.main(args.rest)
    return 0


def cmd_evals_fetch(args: argparse.Namespace) -> int:
    from pretrain.eval import fetch

    return fetch.main(
        [*(["--dir", args.dir] if args.dir else []), *(["--force"] if args.force else [])]
    )


def cmd_data(args: argparse.Namespace) -> int:
    from app import demo

    summary = demo.data_summary(demo.run_data(args))
    for key, value in summary.items():
        print(f"  {key}: {value}")
    print(json.dumps(summary))
    return 0


def decisions(limit: int = 10) -> tuple[list[dict], list[str]]:
    """Recent recovery decisions recorded as run tags on the instance in DAGSTER_HOME, and a
    warning for each run whose ``pretrain/decision`` tag is not a decision (skipped)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home or not Path(home).is_dir():
        return [], []  # no instance here yet: nothing was recorded
    import dataclasses

    from dagster import DagsterInstance, RunsFilter

    from foundation.decisions import DECISION_TAG, read_decision
    from foundation.orphaned_runs import fail_orphaned_runs
    from pretrain.errors import DataError

    instance = DagsterInstance.get()
    for run_id in fail_orphaned_runs(instance, by="pretrain status"):
        print(f"run {run_id} was left STARTED by a killed process: marked failed")
    runs = instance.get_runs(RunsFilter(job_name="train"), limit=50)
    found, warnings = [], []
    for run in runs:
        if DECISION_TAG not in run.tags:
            continue
        try:
            decision = read_decision(run)
        except DataError as exc:
            warnings.append(str(exc))
            continue
        found.append({"run_id": run.run_id[:8], **dataclasses.asdict(decision)})
    return found[:limit], warnings


def cmd_status(args: argparse.Namespace) -> int:
    from pretrain import storage
    from pretrain.checkpoint.dcp import list_branches
    from pretrain.checkpoint.status import branch_status, status_lines

    run_root = storage.join(args.root, "runs")  # local or s3://
    branches = list_branches(run_root)
    if not branches:
        print(f"no training runs under {run_root}")
    checksums = not args.sizes_only
    statuses = [branch_status(run_root, b, checksums=checksums) for b in branches]
    for line in status_lines(statuses):
        print(line)
    found, warnings = decisions()
    for warning in warnings:
        print(f"warning: {warning}")
    for decision in found:
        print(
            f"decision on run {decision['run_id']}: {decision.get('action')} — "
            f"{decision.get('reason', '')}"
        )
    from pretrain.quarantine.status import quarantine_status
    from pretrain.quarantine.status import status_lines as quarantine_lines

    summary = quarantine_status(args.root)
    if summary is not None:
        print("\n".join(quarantine_lines(summary)))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pretrain import storage
    from pretrain.checkpoint.dcp import checkpoint_dir_for_key
    from pretrain.train.export import export_checkpoint

    ckpt = checkpoint_dir_for_key(storage.join(args.root, "runs"), args.key)
    out = export_checkpoint(ckpt, args.out, dtype=args.dtype)
    print(f"exported {args.key} to {out}")
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the stage options (generated by the Dagster side: importing it takes seconds)
    only on the command that takes them, ``command`` (None: every command's)."""
    root = os.environ.get("PRETRAIN_ROOT", ".pretrain/artifacts")
    parser = argparse.ArgumentParser(prog="pretrain", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    plan = sub.add_parser("plan", help="compute plan: N, D, FLOPs, GPU-hours, cost, recipe")
    plan.add_argument("--gpu", default="h100", help="a100, h100, h200")
    plan.add_argument("--gpus", type=int, default=64)
    plan.add_argument("--days", type=float, default=14.0)
    plan.add_argument("--price", type=float, default=2.5, help="$ per GPU-hour")
    plan.add_argument("--mfu", type=float, default=0.4)
    plan.add_argument("--params", type=float, help="plan for this model size instead")
    plan.add_argument("--tokens", type=float, help="with --params (default: 20 per param)")
    plan.add_argument("--root", default=root, help="artifact root (its proxy experiments)")
    plan.set_defaults(func=cmd_plan)

    # the demo parses its own options (main passes them on; `pretrain demo --help` lists them)
    demo = sub.add_parser(
        "demo", help="materialize the whole graph (as `make demo`)", add_help=False
    )
    demo.set_defaults(func=cmd_demo)

    evals = sub.add_parser("evals", help="evaluation task files")
    evals_sub = evals.add_subparsers(dest="evals_command", required=True)
    fetch = evals_sub.add_parser(
        "fetch", help="download HellaSwag, ARC-Easy, BLiMP, WikiText from the Hugging Face Hub"
    )
    fetch.add_argument(
        "--dir", default=None, help="default: $PRETRAIN_EVAL_DIR or ~/.cache/pretrain/eval"
    )
    fetch.add_argument("--force", action="store_true", help="download again even if cached")
    fetch.set_defaults(func=cmd_evals_fetch)

    data = sub.add_parser(
        "data",
        help="only the data stages (ingest → filter → dedup → mixture) on a folder or s3:// prefix",
    )
    add_data_options(data, source_default=None)
    if command in (None, "data"):
        add_stage_options(data, ("raw", "quality", "toxicity", "filter", "dedup", "mixture"))
    data.set_defaults(func=cmd_data)

    status = sub.add_parser("status", help="latest checkpoints, health, recovery decisions")
    status.add_argument("--root", default=root, help="artifact root")
    status.add_argument(
        "--sizes-only",
        action="store_true",
        help="verify checkpoints by file size only (no checksums: nothing is read)",
    )
    status.set_defaults(func=cmd_status)

    export = sub.add_parser("export", help="topology-free export of a checkpoint")
    export.add_argument("key", help="checkpoint key, e.g. b00-s000000600")
    export.add_argument("out", help="output directory")
    export.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    export.add_argument("--root", default=root, help="artifact root")
    export.set_defaults(func=cmd_export)
    add_experiments_parser(sub, root, options=command in (None, "experiments"))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command; a user error (bad input, bad setting, damaged checkpoint) is one line on
    stderr that says what to do, and exit status 1, never a traceback."""
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((w for w in words if not w.startswith("-")), None))
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":  # every option after `demo` is the demo's own
        args.rest = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return report_user_errors(args.command, args.func, args)


if __name__ == "__main__":
    sys.exit(main())
