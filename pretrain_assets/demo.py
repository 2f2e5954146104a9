"""``make demo``: materialize the whole asset graph through Dagster on the embedded corpus.

    DAGSTER_HOME=$PWD/.dagster_home .venv/bin/python -m pretrain_assets.demo
    .venv/bin/python -m pretrain_assets.demo --source /data/crawl --source-name web --steps 300

Every stage runs as a Dagster job on the project instance (visible afterwards in
``make ui``): ``ingest`` per shard, ``quality`` (the quality classifier), ``shard_pipeline`` per shard,
``band_pairs`` per band partition, ``dedup``, ``apply_dedup`` per shard,
``corpus``, ``train`` and ``evaluate`` for the final checkpoint. Prints a summary at the end.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from dagster import DagsterInstance, Definitions

from pretrain.train.checkpoint import checkpoint_key, list_checkpoints
from pretrain_assets.definitions import build_definitions, default_artifact_root
from pretrain_assets.partitions import band_partitions
from pretrain_assets.shards import plan_source, register_shards
from pretrain_assets.summary import format_summary
from resources.storage import ArtifactStore


def demo_run_config(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Run config per job, sized so the demo finishes in minutes on 2 CPU cores."""
    return {
        "shard_pipeline": {},
        "corpus": {
            "ops": {
                "tokenizer": {"config": {"vocab_size": args.vocab_size}},
                "packed_tokens": {"config": {"seq_len": args.seq_len}},
            }
        },
        "evaluate": {
            "ops": {"eval_reports": {"config": {"max_examples_per_task": args.eval_examples}}}
        },
        "train": {
            "ops": {
                "train_model": {
                    "config": {
                        "max_steps": args.steps,
                        "checkpoint_every": max(1, args.steps // 4),
                        "resume": "none",
                        "branch": "b00",
                    }
                }
            }
        },
    }


def execute(
    defs: Definitions,
    job_name: str,
    instance: DagsterInstance,
    *,
    partition_key: str | None = None,
    run_config: dict | None = None,
    quiet: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run one job in process; return {asset_key: metadata} of its materializations."""
    started = time.monotonic()
    loggers = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}
    result = defs.resolve_job_def(job_name).execute_in_process(
        instance=instance, partition_key=partition_key, run_config={**loggers, **(run_config or {})}
    )
    if not result.success:
        raise SystemExit(f"job {job_name} ({partition_key}) failed; see `make ui`")
    where = f"[{partition_key}]" if partition_key else ""
    if not quiet:
        print(f"  {job_name}{where}: ok in {time.monotonic() - started:.1f}s", flush=True)
    out: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        out[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    if job_name == "train":
        out["train_model"] = result.output_for_node("train_model")
    return out


def run_demo(args: argparse.Namespace) -> dict[str, Any]:
    instance = DagsterInstance.get()
    root = args.artifact_root or default_artifact_root()
    defs = build_definitions(artifact_root=root, nproc_per_node=args.nproc)
    store = ArtifactStore(root=root)
    configs = demo_run_config(args)
    manifests = plan_source(
        args.source,
        source_name=args.source_name,
        max_shards=args.shards,
        max_files_per_source=args.max_files_per_source,
    )
    for extra in args.add_source:
        name, _, uri = extra.partition("=")
        manifests += plan_source(uri, source_name=name, max_shards=args.shards)
    keys = register_shards(instance, store, manifests)
    print(f"registered {len(keys)} shard groups: {', '.join(keys)}", flush=True)

    execute(defs, "plan", instance)
    per_shard: list[dict[str, dict[str, Any]]] = []
    for key in keys:
        per_shard.append(execute(defs, "ingest", instance, partition_key=key))
    quality = execute(defs, "quality", instance)
    for key, results in zip(keys, per_shard, strict=True):
        results.update(execute(defs, "shard_pipeline", instance, partition_key=key))
    band_keys, started = band_partitions.get_partition_keys(), time.monotonic()
    for band_key in band_keys:
        execute(defs, "band_pairs", instance, partition_key=band_key, quiet=True)
    print(f"  band_pairs: {len(band_keys)} band partitions ok in {time.monotonic() - started:.1f}s")
    clusters = execute(defs, "dedup", instance)
    deduped = [execute(defs, "apply_dedup", instance, partition_key=key) for key in keys]
    corpus = execute(defs, "corpus", instance, run_config=configs["corpus"])
    trained = execute(defs, "train", instance, run_config=configs["train"])
    # every checkpoint still on disk (keep-last-K pruned the oldest), then the comparison
    run_root = store.uri("runs")
    kept = [c.name for c in list_checkpoints(run_root, "b00")]
    keys_on_disk = [checkpoint_key("b00", int(name.removeprefix("step-"))) for name in kept]
    final_key = keys_on_disk[-1]
    for key in keys_on_disk[:-1]:
        execute(defs, "evaluate", instance, partition_key=key, run_config=configs["evaluate"])
    evaluated = execute(
        defs, "evaluate", instance, partition_key=final_key, run_config=configs["evaluate"]
    )
    comparison = execute(defs, "compare_evals", instance)
    exported = execute(defs, "export_hf", instance, partition_key=final_key)
    return {
        "root": root,
        "final_checkpoint": final_key,
        "shards": per_shard,
        "quality": quality,
        "clusters": clusters,
        "deduped": deduped,
        "corpus": corpus,
        "trained": trained,
        "eval": evaluated,
        "comparison": comparison,
        "hf_export": exported,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="embedded", help="'embedded', a folder or s3:// prefix")
    parser.add_argument("--source-name", default="web", help="mixture source name for --source")
    parser.add_argument(
        "--artifact-root", default=None, help="default: $PRETRAIN_ROOT or .pretrain/artifacts"
    )
    parser.add_argument(
        "--add-source",
        action="append",
        default=[],
        metavar="NAME=URI",
        help="another source (folder or s3:// prefix) with its mixture name; repeatable",
    )
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--max-files-per-source", type=int, default=None, help="cap per source")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument(
        "--eval-examples", type=int, default=500, help="examples per zero-shot task (if present)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.monotonic()
    results = run_demo(args)
    print(format_summary(results, wall_s=time.monotonic() - started))
    print(json.dumps({"demo_wall_s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
