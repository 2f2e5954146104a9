"""``make demo``: materialize the whole asset graph through Dagster on the embedded corpus.

    DAGSTER_HOME=$PWD/.dagster_home .venv/bin/python -m app.demo
    .venv/bin/python -m app.demo --source /data/crawl --source-name web --steps 300
    .venv/bin/python -m app.demo --filter.heuristics.max_chars 5000000 \
        --dedup.threshold 0.7 --train.optim.lr 1e-3        # any stage setting: --help lists all
    .venv/bin/pretrain data --source /data/crawl --source-name web   # data stages only

``--reference URI`` gives the quality classifier reference text (without any it is skipped
with a warning and ``quality_score`` is heuristic); ``--languages en,de`` keeps only those.
``run_data`` (``pretrain data``) stops after the data stages with the ``data_mixture`` job.

Every stage runs as a Dagster job on the project instance (visible afterwards in
``make ui``), each job named after the asset it materializes: ``raw_shards``,
``filtered_shards``, ``minhash_signatures`` and ``deduped_shards`` each one run over every shard
group (a batch, as a backfill runs them), ``quality_classifier``, ``toxicity_classifier``,
``dedup_pairs`` per band partition, ``dedup_clusters``, a small mixture search
(``experiment_basis``, ``proxy_pools``, ``proxy_runs`` per candidate, ``mixture_search``;
skipped with one line saying why where none can run, e.g. over one source),
``data_mixture``, ``tokenizer``, ``packed_tokens``, ``train`` and ``eval_reports`` for the
kept checkpoints, ``eval_comparison`` and ``hf_export``. Prints a summary at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from typing import Any

from dagster import DagsterInstance, Definitions, RunsFilter

from app.source_options import add_data_options, data_settings
from app.summary import format_summary
from foundation.orphaned_runs import fail_orphaned_runs, host_tags
from foundation.partitions import RANGE_END, RANGE_START, band_partitions
from foundation.shards import plan_sources, register_shards
from foundation.stages import add_stage_options, check_settings, run_configs, stage_settings
from pretrain.checkpoint.dcp import checkpoint_key, list_checkpoints
from pretrain.data.raw import ShardManifest, require_documents
from pretrain.errors import ConfigError
from resources.storage import ArtifactStore


def demo_settings(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The demo's presets, as stage settings, sized to finish in minutes on 2 CPU cores;
    ``--<stage>.<field>`` options given on the command line win over them."""
    presets: dict[str, dict[str, Any]] = {
        "tokenizer": {"vocab_size": args.vocab_size},
        "packing": {"seq_len": args.seq_len},
        "eval": {"max_examples_per_task": args.eval_examples, "max_sequences_per_source": 64},
        "train": {
            "run": {"max_steps": args.steps, "resume": "none", "branch": "b00"},
            "checkpoint": {"every_steps": max(1, args.steps // 4)},
        },
    }
    return deep_merge(deep_merge(presets, data_settings(args)), stage_settings(args))


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, mappings merged key by key."""
    out = dict(base)
    for key, value in top.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = deep_merge(out[key], value) if both else value
    return out


def execute(
    defs: Definitions,
    job_name: str,
    instance: DagsterInstance,
    *,
    partition_key: str | None = None,
    partitions: list[str] | None = None,
    run_config: dict | None = None,
    quiet: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run one job in process; return {asset_key: metadata} of its materializations, or with
    ``partitions`` (a batch: one run over the partition range, as a backfill runs it)
    {partition: {asset_key: metadata}}.

    Dagster's console logger would print a failing step's stack trace: it is kept quiet, the
    run's warnings are printed here one line each, and a failure raises the step's own
    exception (a ConfigError or DataError is then one line from the ``pretrain`` command; the
    whole run, stack traces included, stays in the instance: ``make ui``)."""
    started = time.monotonic()
    loggers = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    tags = host_tags()  # lets the next start mark this run failed if the demo is killed
    if partitions:
        tags = {**tags, RANGE_START: partitions[0], RANGE_END: partitions[-1]}
    result = None
    try:
        result = defs.resolve_job_def(job_name).execute_in_process(
            instance=instance,
            partition_key=partition_key,
            run_config={**loggers, **(run_config or {})},
            tags=tags,
        )
    finally:
        print_warnings(instance, result.run_id if result else _last_run_id(instance, job_name))
    where = f"[{partition_key}]" if partition_key else ""
    if partitions:
        where = (
            f"[{partitions[0]}..{partitions[-1]}]" if len(partitions) > 1 else f"[{partitions[0]}]"
        )
    if not result.success:
        raise SystemExit(f"job {job_name}{where} failed; see `make ui`")
    if not quiet:  # named by what it made: raw_shards_job -> raw_shards
        label = job_name.removesuffix("_job")
        print(f"  {label}{where}: ok in {time.monotonic() - started:.1f}s", flush=True)
    out: dict[str, dict[str, Any]] = {}
    by_partition: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        values = {k: v.value for k, v in mat.metadata.items()}
        out[mat.asset_key.to_user_string()] = values
        if mat.partition is not None and "batch_output" not in values:
            by_partition.setdefault(mat.partition, {})[mat.asset_key.to_user_string()] = values
    if job_name == "train":
        out["train_model"] = result.output_for_node("train_model")
    return by_partition if partitions else out


def plan_data_sources(args: argparse.Namespace) -> list[ShardManifest]:
    """The shard groups of ``--source`` and every ``--add-source NAME=URI`` (a name given
    twice is one source with the files of both folders)."""
    name = "embedded" if args.source == "embedded" else args.source_name
    sources = [(name, args.source)]
    for extra in args.add_source:
        extra_name, sep, uri = extra.partition("=")
        if not sep:
            raise ConfigError(f"--add-source {extra!r}: use NAME=URI, e.g. books=/data/books")
        sources.append((extra_name.strip(), uri.strip()))
    return plan_sources(
        sources, max_shards=args.shards, max_files_per_source=args.max_files_per_source
    )


def print_warnings(instance: DagsterInstance, run_id: str | None) -> None:
    """The warnings a run logged (a classifier skipped, a check that warns), one line each."""
    if run_id is None:
        return
    for entry in instance.all_logs(run_id):
        if entry.level == logging.WARNING and entry.user_message:
            where = entry.step_key or entry.job_name
            text = " ".join(entry.user_message.split())
            print(f"  warning ({where}): {text}", file=sys.stderr, flush=True)


def _last_run_id(instance: DagsterInstance, job_name: str) -> str | None:
    runs = instance.get_runs(RunsFilter(job_name=job_name), limit=1)
    return runs[0].run_id if runs else None


def run_data_stages(
    defs: Definitions,
    instance: DagsterInstance,
    store: ArtifactStore,
    configs: dict[str, dict[str, Any]],
    manifests: list[ShardManifest],
) -> dict[str, Any]:
    """Register the sources' shard groups, then raw → classifiers → filter → dedup, each
    per-shard stage one run over every group (a batch, as a backfill runs it)."""
    keys = register_shards(instance, store, manifests)
    print(f"registered {len(keys)} shard groups: {', '.join(keys)}", flush=True)
    per_shard = execute(defs, "raw_shards_job", instance, partitions=keys,
                        run_config=configs.get("raw_shards_job"))  # fmt: skip
    require_documents([store.uri("raw_shards", key) for key in keys])  # else: fails at mixture
    quality = {
        **execute(defs, "quality_classifier_job", instance, run_config=configs.get("quality_classifier_job")),
        **execute(defs, "toxicity_classifier_job", instance, run_config=configs.get("toxicity_classifier_job")),
    }  # fmt: skip
    skipped = quality.get("quality_classifier", {}).get("skipped")
    if skipped:
        print(f"  note: {skipped}", flush=True)
    for job in ("filtered_shards_job", "minhash_signatures_job"):
        made = execute(defs, job, instance, partitions=keys, run_config=configs.get(job))
        for key in keys:
            per_shard.setdefault(key, {}).update(made.get(key, {}))
    band_keys, started = band_partitions.get_partition_keys(), time.monotonic()
    for band_key in band_keys:
        execute(
            defs, "dedup_pairs_job", instance, partition_key=band_key,
            run_config=configs.get("dedup_pairs_job"), quiet=True,
        )  # fmt: skip
    print(
        f"  dedup_pairs: {len(band_keys)} band partitions ok in {time.monotonic() - started:.1f}s"
    )
    clusters = execute(
        defs, "dedup_clusters_job", instance, run_config=configs.get("dedup_clusters_job")
    )
    deduped = execute(defs, "deduped_shards_job", instance, partitions=keys)
    return {"shards": [per_shard.get(k, {}) for k in keys], "quality": quality,
            "clusters": clusters, "deduped": [deduped.get(k, {}) for k in keys]}  # fmt: skip


def run_experiments(
    args: argparse.Namespace,
    defs: Definitions,
    instance: DagsterInstance,
    store: ArtifactStore,
    configs: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """A small mixture search: the experiment basis and pools, ``--search-candidates`` proxies
    and the anchors (``proxy_tiny``, in this process), the proposal's verification proxy, the
    fit. A daemon would run the candidates as one backfill (the ``launch_search`` job) and
    ``experiment_sensor`` the rest; the demo has neither, so it runs each partition.

    A search that cannot run (one source: nothing to decide) is skipped with one line that
    says why; the corpus then takes the configured weights."""
    from foundation.experiment_launches import register_experiments
    from foundation.experiments import experiment_root
    from pretrain.experiments.evidence import (
        search_candidates,
        search_fit,
        search_skipped,
        verification_specs,
    )
    from pretrain.experiments.search import SearchConfig

    config = SearchConfig(candidates=args.search_candidates, seeds=(0,), recipe="proxy_tiny")
    skipped = search_skipped(experiment_root(instance, store), config)
    if skipped:
        print(
            f"  mixture search skipped: {skipped}; training on the configured weights", flush=True
        )
        return {"search_skipped": skipped}
    basis = execute(
        defs, "experiment_basis_job", instance, run_config=configs.get("experiment_basis_job")
    )
    keys = list(instance.get_dynamic_partitions("shards"))
    execute(defs, "proxy_pools_job", instance, partitions=keys)
    _, _, specs = search_candidates(experiment_root(instance, store), config)
    names = register_experiments(instance, store, specs)
    proxy = run_configs({"proxy": {"in_process": True}})["proxy_runs_job"]
    started = time.monotonic()
    for name in names:
        execute(defs, "proxy_runs_job", instance, partition_key=name, run_config=proxy, quiet=True)
    report, _, _ = search_fit(experiment_root(instance, store), config)  # checked by a proxy
    checks = register_experiments(instance, store, verification_specs(config, report))
    for name in checks:
        execute(defs, "proxy_runs_job", instance, partition_key=name, run_config=proxy, quiet=True)
    names += checks
    print(f"  proxy_runs: {len(names)} proxies ok in {time.monotonic() - started:.1f}s")
    search = {"search": dataclasses.asdict(config)}
    fit = execute(
        defs, "mixture_search_job", instance, run_config=run_configs(search)["mixture_search_job"]
    )
    return {"basis": basis, "proxies": len(names), "search": fit.get("mixture_search", {})}


def project_instance() -> DagsterInstance:
    """The instance in ``$DAGSTER_HOME``; a missing setting or folder is a ConfigError that
    says what to run (Dagster's own error is a traceback)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise ConfigError(
            "DAGSTER_HOME is not set: every stage runs as a Dagster job recorded in the "
            "instance there; run `mkdir -p .dagster_home && export DAGSTER_HOME=$PWD/.dagster_home` "
            "(make demo and make ui set it themselves)"
        )
    if not os.path.isdir(home):
        raise ConfigError(f"DAGSTER_HOME={home} is not a folder: create it (mkdir -p {home})")
    return DagsterInstance.get()


def definitions(**settings: Any) -> Definitions:
    """The project's definitions, imported only once the settings and sources were checked:
    building every asset takes seconds, and a user error should not wait for it."""
    from app.definitions import build_definitions

    return build_definitions(**settings)


def start(args: argparse.Namespace) -> tuple[DagsterInstance, str]:
    """The project instance (runs a killed process left STARTED marked failed) and the root."""
    instance = project_instance()
    for run_id in fail_orphaned_runs(instance, by="pretrain demo"):
        print(f"run {run_id} was left STARTED by a killed process: marked failed", flush=True)
    from app.definitions import default_artifact_root

    return instance, args.artifact_root or default_artifact_root()


def run_demo(args: argparse.Namespace) -> dict[str, Any]:
    from pretrain.eval.fetch import fetch_eval_tasks

    settings = demo_settings(args)
    check_settings(settings)  # a bad value or source is refused before any download or run
    manifests = plan_data_sources(args)
    if args.eval_dir:
        os.environ["PRETRAIN_EVAL_DIR"] = args.eval_dir  # read by decontam and eval_reports
    # Eval tasks first: the mixture's decontamination reads the same files. Offline, the
    # line says so and the tasks are reported as not scored.
    fetched = fetch_eval_tasks()
    print(fetched.line(), flush=True)
    instance, root = start(args)
    defs = definitions(artifact_root=root, nproc_per_node=args.nproc)
    store = ArtifactStore(root=root)
    configs = run_configs(settings)
    execute(defs, "scaling_plan_job", instance, run_config=configs.get("scaling_plan_job"))
    data = run_data_stages(defs, instance, store, configs, manifests)
    experiments = (
        run_experiments(args, defs, instance, store, configs) if args.search_candidates else {}
    )
    corpus: dict[str, dict[str, Any]] = {}
    for job in ("data_mixture_job", "tokenizer_job", "packed_tokens_job"):
        corpus.update(execute(defs, job, instance, run_config=configs.get(job)))
    trained = execute(defs, "train", instance, run_config=configs.get("train"))
    # every checkpoint still on disk (keep-last-K pruned the oldest), then the comparison
    run_root = store.uri("runs")
    kept = [c.name for c in list_checkpoints(run_root, "b00")]
    keys_on_disk = [checkpoint_key("b00", int(name.removeprefix("step-"))) for name in kept]
    final_key = keys_on_disk[-1]
    for key in keys_on_disk[:-1]:
        execute(defs, "eval_reports_job", instance, partition_key=key,
                run_config=configs.get("eval_reports_job"))  # fmt: skip
    evaluated = execute(defs, "eval_reports_job", instance, partition_key=final_key,
                        run_config=configs.get("eval_reports_job"))  # fmt: skip
    comparison = execute(defs, "eval_comparison_job", instance)
    exported = execute(defs, "hf_export_job", instance, partition_key=final_key,
                       run_config=configs.get("hf_export_job"))  # fmt: skip
    return {
        "root": root,
        "final_checkpoint": final_key,
        **data,
        "corpus": corpus,
        "trained": trained,
        "eval": evaluated,
        "comparison": comparison,
        "hf_export": exported,
        "eval_fetch": fetched.line(),
        "experiments": experiments,
    }


def run_data(args: argparse.Namespace) -> dict[str, Any]:
    """``pretrain data``: only the data stages, ending with the mixture (no tokenizer/training)."""
    settings = deep_merge(data_settings(args), stage_settings(args))
    check_settings(settings)  # a bad value or source is refused before any run
    manifests = plan_data_sources(args)
    instance, root = start(args)
    defs = definitions(artifact_root=root)
    store = ArtifactStore(root=root)
    configs = run_configs(settings)
    data = run_data_stages(defs, instance, store, configs, manifests)
    made = execute(defs, "data_mixture_job", instance, run_config=configs.get("data_mixture_job"))
    data["mixture"] = made["data_mixture"]
    data["root"] = root
    return data


def data_summary(data: dict[str, Any]) -> dict[str, Any]:
    """The counts of every data stage, from the metadata Dagster recorded."""

    def total(rows: list[dict], asset: str, key: str) -> int:
        return sum(int(r.get(asset, {}).get(key, 0)) for r in rows)

    shards, deduped, mixture = data["shards"], data["deduped"], data["mixture"]
    return {
        "raw_documents": total(shards, "raw_shards", "documents"),
        "raw_rejected": total(shards, "raw_shards", "rejected"),
        "filter_kept": total(shards, "filtered_shards", "kept"),
        "filter_dropped": total(shards, "filtered_shards", "dropped"),
        "dedup_kept": total(deduped, "deduped_shards", "kept"),
        "train_docs": int(mixture["train_docs"]),
        "val_docs": int(mixture["val_docs"]),
        "quality_classifier": data["quality"].get("quality_classifier", {}).get("skipped")
        or "trained",
        "toxicity_classifier": _toxicity_summary(data["quality"].get("toxicity_classifier", {})),
        "mixture": f"{data['root']}/data_mixture",
    }


def _toxicity_summary(stats: dict[str, Any]) -> str:
    if stats.get("skipped") or "heldout_recall" not in stats:
        return str(stats.get("skipped") or "not materialized")
    return (
        f"trained on {stats['toxic']} toxic + {stats['clean']} clean examples: held-out "
        f"recall {stats['heldout_recall']}, precision {stats['heldout_precision']}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_options(parser)
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument(
        "--eval-examples", type=int, default=500, help="examples per zero-shot task (if present)"
    )
    parser.add_argument(
        "--eval-dir", default=None, help="eval task folder (default: $PRETRAIN_EVAL_DIR or "
        "~/.cache/pretrain/eval, filled from the Hugging Face Hub)",
    )  # fmt: skip
    parser.add_argument(
        "--search-candidates", type=int, default=6,
        help="a mixture search of this many proxy_tiny proxies (0: no experiments)",
    )  # fmt: skip
    add_stage_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.monotonic()
    results = run_demo(args)
    print(format_summary(results, wall_s=time.monotonic() - started))
    print(json.dumps({"demo_wall_s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    from app.user_errors import report_user_errors

    sys.exit(report_user_errors("demo", main))
