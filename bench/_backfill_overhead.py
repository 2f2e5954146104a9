"""What a backfill costs per shard group beyond the group's own work, one run per group vs runs
of a batch (``bench/control_plane_scale.py --part overhead``).

Real runs through the real daemon: ``N`` shard groups of the embedded corpus (real text on
this machine) registered in a fresh SQLite instance, one backfill of ``raw_shards`` over all of
them submitted as the UI's button does (``foundation.backfills.launch_asset_backfill``), and
``dagster-daemon`` running it with the project's ``dagster.yaml`` (2 runs at a time, the
default run launcher: a process per run, the multiprocess executor: a process per step), the
per-shard assets backfilled ``partitions_per_run`` groups a run
(``PRETRAIN_PARTITIONS_PER_RUN``). From the instance's records: the span from the first run's
start to the last run's end, and the groups' own CPU time (their ``cpu_seconds``); per-group
overhead = (span x 2 - compute) / N, what a group costs beyond its work (process starts,
imports, the step launch, event writes).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONCURRENCY = 2


def one_mode(work: Path, groups: int, per_run: int) -> dict[str, Any]:
    from _probes import process, wait_for
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

    from foundation.backfills import launch_asset_backfill
    from foundation.partitions import shard_partitions
    from foundation.shards import plan_source, register_shards
    from resources.storage import ArtifactStore

    home, root = work / "dagster_home", work / "artifacts"
    (home / ".nux").mkdir(parents=True)
    settings = yaml.safe_load((ROOT / "config" / "dagster.yaml").read_text())
    settings.setdefault("concurrency", {})["runs"] = {"max_concurrent_runs": CONCURRENCY}
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    env = {**os.environ, "DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root),
           "PRETRAIN_PARTITIONS_PER_RUN": str(per_run)}  # fmt: skip
    with DagsterInstance.from_config(str(home)) as instance:
        manifests = plan_source("embedded", max_shards=groups, max_files_per_source=groups * 2)
        keys = register_shards(instance, ArtifactStore(root=str(root)), manifests)
        daemon = [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"]
        with process(daemon, env, work / "daemon.log", ROOT):
            submitted = time.perf_counter()
            backfill = launch_asset_backfill(instance, AssetKey("raw_shards"), shard_partitions,
                                             keys, tags={}, title=f"overhead x{per_run}")  # fmt: skip
            filters = RunsFilter(tags={"dagster/backfill": backfill})

            def finished() -> bool:
                runs = instance.get_runs(filters)
                done = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE}
                materialized = instance.get_materialized_partitions(AssetKey("raw_shards"))
                return bool(runs) and all(r.status in done for r in runs) and (
                    set(keys) <= materialized)  # fmt: skip

            wait_for(finished, 1800, "the backfill's runs", poll_s=2.0)
            waited = time.perf_counter() - submitted
        records = instance.get_run_records(filters)
        starts = [r.start_time for r in records if r.start_time]
        ends = [r.end_time for r in records if r.end_time]
        span = max(ends) - min(starts)
        cpu = 0.0
        for record in instance.fetch_materializations(AssetKey("raw_shards"), limit=10_000).records:
            value = record.asset_materialization.metadata.get("cpu_seconds")
            cpu += float(value.value) if value is not None else 0.0
    return {"groups": len(keys), "partitions_per_run": per_run, "runs": len(records),
            "failed_runs": sum(r.dagster_run.status.value == "FAILURE" for r in records),
            "span_s": round(span, 1), "submitted_to_done_s": round(waited, 1),
            "compute_s": round(cpu, 1),
            "overhead_per_group_s": round((span * CONCURRENCY - cpu) / len(keys), 2)}  # fmt: skip


def backfill_overhead(work: Path, groups: int, modes: tuple[int, ...] = (1, 16)) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for per_run in modes:
        folder = work / f"per_run_{per_run}"
        folder.mkdir(parents=True, exist_ok=True)
        out[f"per_run_{per_run}"] = found = one_mode(folder, groups, per_run)
        print(f"backfill of {found['groups']} groups, {per_run} a run: {found}", flush=True)
    first, last = (out[f"per_run_{m}"]["overhead_per_group_s"] for m in (modes[0], modes[-1]))
    out["overhead_ratio"] = round(last / first, 3) if first else None
    return out
