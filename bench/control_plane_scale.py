"""The control plane at campaign scale: sensors, status, backfills and the UI at 1,000 and 10,000
shard groups (issue 40).

    .venv/bin/python bench/control_plane_scale.py                  # both sizes, both setups
    .venv/bin/python bench/control_plane_scale.py --sizes 200 1000 --setups sqlite-local
    nohup .venv/bin/python bench/control_plane_scale.py > /tmp/control_plane.log 2>&1 &

Each setup builds one campaign instance (``tests/helpers/campaign.py``: partitions, materializations with
data versions, 1,000 checkpoint partitions, 500 experiments, at least 20,000 runs, and the
artifact store's files), first at the smaller size, measures, grows it to the larger and measures
again:

- ``sqlite-local``: the default instance (SQLite under ``$DAGSTER_HOME``), the store on disk;
- ``postgres-s3``: Postgres instance storage (a real server, ``tests/servers/postgres_server.py``), the
  store on S3 (``moto_server``: every HTTP request it serves is counted).

Measured at each size (``bench/_probes.py``): every sensor's first tick (no cursor), its idle tick
(the cursor of the first, nothing new) and, for the engine's sensors, a tick after a few new
materializations — wall time, SQL statements, artifact-store calls (and S3 requests); the
backfill schedule's staleness check; ``pretrain status`` as a user runs it (a new process); the
asset page, the partitions view and the runs page of the UI in headless Chromium (cold, from
navigation to the content shown); the submission of a backfill of every shard group through the
webserver's GraphQL (as the UI's button does) and the rate at which the real daemon turns it into
runs (the run queue is held at 0 concurrent runs, so nothing executes). ``--part overhead``
(``bench/_backfill_overhead.py``) runs a real backfill of 16 groups through the daemon, one run
per group against 16 a run, and reports what a group costs beyond its own work. Ends with one
JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import yaml  # noqa: E402
from _probes import CHROMIUM, MotoLog, free_port, moto, page_load_s, process, wait_for  # noqa: E402

from tests.helpers.campaign import Campaign, build, group_key  # noqa: E402
from tests.helpers.ticks import Counting, tick_every_sensor  # noqa: E402

BIN = Path(sys.executable).parent
SETUPS = ("sqlite-local", "postgres-s3")
HOLD_QUEUE = {"runs": {"max_concurrent_runs": 0}}  # under concurrency: nothing is dequeued
CHANGED = 10  # materializations added before the "changed" ticks


@contextlib.contextmanager
def instance_home(setup: str, work: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """A ``$DAGSTER_HOME`` with the project's ``dagster.yaml`` (run queue held), on SQLite or a
    real Postgres server; yields it and the storage settings."""
    home = work / "dagster_home"
    (home / ".nux").mkdir(parents=True, exist_ok=True)
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    settings = yaml.safe_load((ROOT / "config" / "dagster.yaml").read_text())
    settings.setdefault("concurrency", {}).update(HOLD_QUEUE)
    if setup.startswith("postgres"):
        from tests.servers.postgres_server import postgres_server

        with postgres_server() as db:
            settings["storage"] = {
                "postgres": {"postgres_db": {**db, "scheme": "postgresql+psycopg2"}}
            }
            (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
            yield home, settings
    else:
        (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
        yield home, settings


@contextlib.contextmanager
def artifact_store(setup: str, work: Path) -> Iterator[tuple[str, str, Path | None]]:
    """(store root, source root, moto's access log or None)."""
    if setup.endswith("s3"):
        log = work / "moto.log"
        with moto(log) as endpoint:
            os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                               "AWS_SECRET_ACCESS_KEY": "testing",
                               "AWS_DEFAULT_REGION": "us-east-1"})  # fmt: skip
            import boto3

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="campaign")
            yield "s3://campaign/artifacts", "s3://campaign/crawl", log
    else:
        yield str(work / "artifacts"), str(work / "crawl"), None


def staleness_check(instance, defs, counts: Counting) -> dict[str, Any]:
    from dagster import build_schedule_context

    from sensors.backfill_schedule import shard_backfill_schedule

    repo = defs.get_repository_def()
    with counts.measure() as m:
        result = shard_backfill_schedule(
            build_schedule_context(instance=instance, repository_def=repo)
        )
    m["result"] = (getattr(result, "skip_message", None) or
                   f"{len(result) if isinstance(result, list) else 1} run requests")  # fmt: skip
    return m


def cli_status(env: dict[str, str], root: str) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run([str(BIN / "pretrain"), "status", "--root", root], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    return {"s": round(time.perf_counter() - started, 2), "rc": done.returncode,
            "lines": len(done.stdout.splitlines()), "tail": done.stdout.strip()[-200:]}  # fmt: skip


RUN_ROW = re.compile(r"\b[0-9a-f]{8}\b")
PAGES = {  # path, and the text that says the content is shown
    "asset_page": ("/assets/filtered_shards", lambda t: "Latest materialization" in t),
    "partitions_view": (
        "/assets/filtered_shards?view=partitions",
        lambda t: "web-0001" in t,
    ),  # fmt: skip
    # the table's first rows: a run id (8 hex digits) under the column heads
    "runs_page": ("/runs", lambda t: "Created at" in t and bool(RUN_ROW.search(t))),
}


GRAPHQL_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on UnauthorizedError { message }
  }
}"""


GRAPHQL_CANCEL = """
mutation Cancel($id: String!) {
  cancelPartitionBackfill(backfillId: $id) { __typename }
}"""


def graphql(port: int, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    import urllib.request

    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    return json.loads(urllib.request.urlopen(request, timeout=600).read())


def ui_and_backfill(env: dict[str, str], work: Path, instance, groups: int) -> dict[str, Any]:
    """The UI pages, then a backfill of every shard group and the daemon's rate of runs; the
    backfill is cancelled and its queued runs deleted after, as an operator would."""
    from dagster import DagsterRunStatus, RunsFilter

    port = free_port()
    out: dict[str, Any] = {}
    webserver = [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1",
                 "-p", str(port)]  # fmt: skip
    with process(webserver, env, work / "webserver.log", ROOT):
        wait_for(lambda: _ok(f"http://127.0.0.1:{port}/server_info"), 120, "the webserver")
        if CHROMIUM:
            for name, (path, shown) in PAGES.items():
                out[name] = page_load_s(f"http://127.0.0.1:{port}{path}", shown)
        keys = [group_key(i) for i in range(groups)]
        params = {"assetSelection": [{"path": ["filtered_shards"]}, {"path": ["minhash_signatures"]}],
                  "partitionNames": keys, "fromFailure": False}  # fmt: skip
        started = time.perf_counter()
        answer = graphql(port, GRAPHQL_BACKFILL, {"params": params})
        out["backfill_submit_s"] = round(time.perf_counter() - started, 2)
        backfill_id = answer.get("data", {}).get("launchPartitionBackfill", {}).get("backfillId")
        if not backfill_id:
            out["backfill_error"] = json.dumps(answer)[:500]
            return out
        filters = RunsFilter(tags={"dagster/backfill": backfill_id})
        daemon = [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"]
        with process(daemon, env, work / "daemon.log", ROOT):
            started, first, seen, covered = time.perf_counter(), None, 0, 0
            while time.perf_counter() - started < 90:
                runs = instance.get_runs(filters)
                seen, covered = len(runs), sum(_partitions_of(run.tags) for run in runs)
                if seen and first is None:
                    first = time.perf_counter() - started
                if covered >= groups:
                    break
                time.sleep(1.0)
            # from the first run seen to the last; at least one poll (all in one poll: >= rate)
            window = max(1.0, time.perf_counter() - started - (first or 0))
            per_run = covered / seen if seen else 0
        graphql(port, GRAPHQL_CANCEL, {"id": backfill_id})
    rate = seen / window if first and window > 0 else 0.0
    out.update({"backfill_runs_created": seen, "groups_covered": covered,
                "partitions_per_run": round(per_run, 1),
                "daemon_first_run_s": round(first, 1) if first else None,
                "daemon_runs_per_s": round(rate, 2),
                "daemon_groups_per_s": round(covered / window if first and window > 0 else 0.0, 1)})  # fmt: skip
    for run in instance.get_runs(filters):  # leave the history as it was
        if run.status in (DagsterRunStatus.QUEUED, DagsterRunStatus.CANCELED):
            instance.delete_run(run.run_id)
    return out


def _partitions_of(tags: dict[str, str]) -> int:
    """Shard groups one run of the backfill materializes (its partition range, else one)."""
    if "dagster/asset_partition_range_start" in tags:
        start, end = (
            tags["dagster/asset_partition_range_start"],
            tags["dagster/asset_partition_range_end"],
        )
        return int(end.split("-")[-1]) - int(start.split("-")[-1]) + 1
    return 1


def _ok(url: str) -> bool:
    import urllib.request

    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except OSError:
        return False


def s3_latency_ms(root: str, repeat: int = 20) -> dict[str, float]:
    """What one request costs ``moto_server`` at this size: a GET of a small object, and the
    LIST with a prefix that pyarrow sends after a HEAD finds no object (is it a folder?). moto
    filters every key of the bucket for a prefix, so its LIST grows with the bucket; S3's
    does not."""
    import statistics

    import boto3

    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    key = f"{prefix}/experiment_basis/basis.json"

    def mean_ms(request) -> float:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            request()
            times.append(time.perf_counter() - started)
        return round(statistics.mean(times) * 1000, 1)

    return {
        "get": mean_ms(lambda: client.get_object(Bucket=bucket, Key=key)["Body"].read()),
        "list_prefix": mean_ms(lambda: client.list_objects_v2(
            Bucket=bucket, Prefix=f"{prefix}/no-such-folder/", Delimiter="/", MaxKeys=1)),
    }  # fmt: skip


def changed_ticks(instance, campaign: Campaign) -> dict[str, Any]:
    """What happens before each sensor's "changed" tick: ``CHANGED`` new materializations."""
    from dagster import AssetMaterialization

    def remade_groups() -> None:  # deduped shards (and pools) remade with the same data
        for i in range(CHANGED):
            for asset in ("deduped_shards", "proxy_pools"):
                v = campaign.versions[i][asset]
                instance.report_runless_asset_event(AssetMaterialization(
                    asset_key=asset, partition=group_key(i), tags={"dagster/data_version": v}))  # fmt: skip

    def new_checkpoints() -> None:
        keys = [f"b00-s{9_000_000 + i:09d}" for i in range(CHANGED)]
        instance.add_dynamic_partitions("checkpoints", keys)
        for key in keys:
            instance.report_runless_asset_event(AssetMaterialization(
                asset_key="checkpoints", partition=key, tags={"dagster/data_version": key}))  # fmt: skip

    return {"experiment_sensor": remade_groups, "eval_sensor": new_checkpoints}


def one_setup(setup: str, sizes: list[int], work: Path) -> dict[str, Any]:
    from dagster import DagsterInstance

    from app.definitions import build_definitions
    from resources.metrics import RecoveryThresholds, WandbMetricsReader
    from resources.sources import ShardSource
    from resources.storage import ArtifactStore

    results: dict[str, Any] = {}
    with (
        instance_home(setup, work) as (home, _),
        artifact_store(setup, work) as (root, source, log),
        Counting() as counts,
    ):
        os.environ["DAGSTER_HOME"] = str(home)
        env = {**os.environ, "DAGSTER_HOME": str(home), "PRETRAIN_ROOT": root,
               "PRETRAIN_SOURCE_URI": source, "PRETRAIN_WANDB_MODE": "offline"}  # fmt: skip
        instance = DagsterInstance.get()
        defs = build_definitions(artifact_root=root)
        graph = defs.resolve_asset_graph()
        code_versions = {k.to_user_string(): graph.get(k).code_version or "none"
                         for k in graph.get_all_asset_keys()}  # fmt: skip
        campaign = Campaign(store_root=root, code_versions=code_versions)
        requests = MotoLog(log).count if log else None
        resources = {"store": ArtifactStore(root=root), "recovery": RecoveryThresholds(),
                     "metrics": WandbMetricsReader(run_root=f"{root}/runs", mode="offline"),
                     "shard_source": ShardSource(uri=source, source_name="web")}  # fmt: skip
        for size in sizes:
            print(f"[{setup}] building {size:,} groups ...", flush=True)
            made = build(instance, campaign, size, source_root=source)
            print(f"[{setup}] built: {made}", flush=True)
            row: dict[str, Any] = {"build": made}
            if log:
                row["s3_latency_ms"] = s3_latency_ms(root)
            row["sensors"] = tick_every_sensor(instance, defs, resources, counts,
                                               changed_ticks(instance, campaign), requests)  # fmt: skip
            row["staleness_check"] = staleness_check(instance, defs, counts)
            row["status"] = cli_status(env, root)
            row["ui"] = ui_and_backfill(env, work, instance, size)
            print(json.dumps({"setup": setup, "groups": size, **row}), flush=True)
            results[str(size)] = row
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=SETUPS)
    parser.add_argument("--work", default="", help="keep the instances here (default: a temp dir)")
    parser.add_argument("--part", choices=["scale", "overhead", "all"], default="all")
    parser.add_argument("--overhead-groups", type=int, default=16,
                        help="overhead: shard groups of the real backfill")  # fmt: skip
    args = parser.parse_args()
    started = time.perf_counter()
    out: dict[str, Any] = {"bench": "control_plane_scale", "sizes": args.sizes,
                           "load_average_start": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    if args.part in ("overhead", "all"):
        from _backfill_overhead import backfill_overhead

        with contextlib.ExitStack() as stack:
            work = Path(args.work) / "overhead" if args.work else Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="cp-overhead-")))  # fmt: skip
            out["backfill_overhead"] = backfill_overhead(work, args.overhead_groups)
    for setup in args.setups if args.part != "overhead" else ():
        with contextlib.ExitStack() as stack:
            work = Path(args.work) / setup if args.work else Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix=f"cp-{setup}-")))  # fmt: skip
            work.mkdir(parents=True, exist_ok=True)
            out[setup] = one_setup(setup, sorted(args.sizes), work)
    out["wall_s"] = round(time.perf_counter() - started, 1)
    out["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
