"""A campaign-sized Dagster instance and artifact store: ``bench/control_plane_scale.py`` and
``tests/dagster/test_sensor_reads.py``.

What a campaign of ``groups`` shard groups leaves behind, written with Dagster's own APIs (no
run is executed: the history is *reported*, which is what a real run writes, minus the compute):

- the ``shards`` partitions, and for every group a materialization of ``raw_shards``,
  ``filtered_shards``, ``minhash_signatures``, ``deduped_shards`` and ``proxy_pools`` carrying
  the data version, code version and input data versions a real run records (so the backfill
  schedule and the UI find every partition current); the global assets once;
- ``checkpoints`` partitions (``b00-s…``) with their ``eval_reports``, ``experiments``
  partitions with their ``proxy_runs``, and the train runs of a campaign with one rollback;
- a run history: one run per ``PARTITIONS_PER_RUN`` groups of each shard stage, as the
  product's batched backfills make them (each new ``dedup_clusters`` remakes every deduped shard
  and pool), one ``data_admission`` run per group decided after the basis, one
  ``eval_reports`` per checkpoint, one ``proxy_runs`` per experiment (each asset's job,
  ``<asset>_job``), and failed earlier attempts of the shard stages until there are
  ``min_runs`` runs;
- in the artifact store (a folder or ``s3://``), the files the sensors and the CLI read: each
  group's manifest (and the index of registered files the discovery sensor keeps) and identity
  chain (``raw → filtered → signatures → dedup_clusters → deduped → pools``, the chain
  :func:`pretrain.identity.is_current` walks), the experiment basis,
  decisions for the groups admitted after it, experiment specs and results, and committed
  checkpoints of the newest steps (keep-last-K) for ``pretrain status``.

Materializations are *reported* (``report_runless_asset_event``, Dagster's public API for
events made outside a run): they land in the same asset index a run's events do, which is what
the sensors, the backfill schedule and the UI's asset pages read; the runs are run records
(``add_run``) for the runs page and every run query. Events attached to runs would need Dagster's
private event classes, and on SQLite one database file per run (40,000 files: hours to make).

The build writes the same rows faster than one call per row (:func:`fast_writes`): each asset's
materializations go in batches through Dagster's own batch writing (``DAGSTER_EVENT_BATCH_SIZE``:
one ``INSERT`` of many events on Postgres), Postgres is written through a held connection (what
``dagster-webserver`` does, ``optimize_for_webserver``), SQLite through one engine per database
file, and the artifact store's files are written in the background while the instance is.

    build(instance, store_root, groups=1000)            # grows an instance to 1,000 groups
    build(instance, store_root, groups=10000)           # and then to 10,000
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dagster import AssetKey, AssetMaterialization, DagsterInstance, DagsterRun, DagsterRunStatus

from foundation.dagster_internals import one_sqlite_engine_per_file, report_materialization_batch
from foundation.per_shard import PARTITIONS_PER_RUN
from foundation.stages import job_name
from pretrain import identity, storage
from pretrain.data.discovery import RegisteredFiles
from pretrain.data.raw import RawFile, ShardManifest
from pretrain.experiments.config import DataVariant, ExperimentSpec
from pretrain.identity import Identity

SOURCE = "web"
FILES_PER_GROUP = 4
BASIS_SHARE = 0.8  # the first 80% of the groups are the basis; later ones were admitted
CHECKPOINT_EVERY = 1000
KEEP_ON_DISK = 5  # committed checkpoints of the newest steps (keep-last-K)
DATA = "dagster/data_version"
CODE = "dagster/code_version"
INPUT, POINTER = "dagster/input_data_version/", "dagster/input_event_pointer/"
SHARD_STAGES = ("raw_shards", "filtered_shards", "deduped_shards", "proxy_pools")
EVENT_BATCH = 500  # materializations of one asset written together


def group_key(i: int) -> str:
    return f"{SOURCE}-{i:04d}"


def version(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def partitions_version(v: str) -> str:
    """What Dagster records as the input data version of one input partition."""
    return hashlib.sha256(v.encode()).hexdigest()


@dataclass
class Campaign:
    """What has been built so far (``build`` grows it)."""

    store_root: str
    code_versions: dict[str, str]
    groups: int = 0
    runs: int = 0
    events: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    basis_groups: int = 0
    versions: dict[int, dict[str, str]] = field(default_factory=dict)  # group -> stage -> version
    pointer: dict[str, int] = field(default_factory=dict)  # asset -> a storage id it has
    globals: dict[str, str] = field(default_factory=dict)  # unpartitioned asset -> version
    writes: ThreadPoolExecutor | None = None  # while building: the store's files written here
    pending: list[Future] = field(default_factory=list)

    def uri(self, *parts: str) -> str:
        return storage.join(self.store_root, *parts)

    def put(self, fn: Any, *args: Any) -> None:
        """Write a file of the store: now, or in the background while the instance is built."""
        if self.writes is None:
            fn(*args)
        else:
            self.pending.append(self.writes.submit(fn, *args))

    @contextlib.contextmanager
    def background_writes(self) -> Iterator[None]:
        """Every :meth:`put` inside goes to a pool of writers; waits for them (and raises what
        failed) on the way out."""
        threads = 16 if storage.is_s3(self.store_root) else 2
        with ThreadPoolExecutor(threads) as self.writes:
            try:
                yield
            finally:
                self.writes = None
                done, self.pending = self.pending, []
                for future in done:
                    future.result()


# -- the artifact store ---------------------------------------------------------------------------


def _write_identity(campaign: Campaign, stage: str, parts: tuple[str, ...],
                    inputs: dict[str, str]) -> str:  # fmt: skip
    ident = Identity(stage=stage, code_version=campaign.code_versions.get(stage, "none"),
                     config_hash="bench", inputs=inputs, version=version(stage, parts, inputs))  # fmt: skip
    campaign.put(identity.write, campaign.uri(stage, *parts), ident)
    return ident.version


def _manifest(i: int, source_root: str) -> ShardManifest:
    g = group_key(i)
    files = tuple(RawFile(uri=storage.join(source_root, f"{g}-{j}.jsonl"), source=SOURCE,
                          kind="jsonl") for j in range(FILES_PER_GROUP))  # fmt: skip
    return ShardManifest(key=g, files=files)


def _group_files(campaign: Campaign, i: int, source_root: str) -> dict[str, str]:
    """One group's manifest and identity chain; returns the versions by stage."""
    g = group_key(i)
    campaign.put(storage.write_bytes, _manifest(i, source_root).to_json().encode(),
                 campaign.uri("manifests", f"{g}.json"))  # fmt: skip
    v = {"raw_shards": _write_identity(campaign, "raw_shards", (g,), {})}
    v["filtered_shards"] = _write_identity(campaign, "filtered_shards", (g,), {
        campaign.uri("raw_shards", g): v["raw_shards"],
        campaign.uri("quality_classifier"): version("quality_classifier", (), {}),
        campaign.uri("toxicity_classifier"): version("toxicity_classifier", (), {}),
    })  # fmt: skip
    v["minhash_signatures"] = _write_identity(campaign, "minhash_signatures", (g,),
                                              {campaign.uri("filtered_shards", g): v["filtered_shards"]})  # fmt: skip
    return v


def _write_source(campaign: Campaign, source_root: str, i: int) -> None:
    for j in range(FILES_PER_GROUP):
        campaign.put(storage.write_bytes, b'{"text": "a"}\n',
                     storage.join(source_root, f"{group_key(i)}-{j}.jsonl"))  # fmt: skip


def write_store(campaign: Campaign, start: int, stop: int, source_root: str) -> dict[int, dict]:
    """The files of groups ``start..stop-1``, the global ones the first time, and a new
    ``dedup_clusters`` over every group, which makes every deduped shard and pool anew (as a
    rerun of dedup does). Returns each group's versions by stage."""
    if start == 0:
        for stage in ("quality_classifier", "toxicity_classifier"):
            _write_identity(campaign, stage, (), {})
    for i in range(start, stop):
        _write_source(campaign, source_root, i)
    made = [_group_files(campaign, i, source_root) for i in range(start, stop)]
    registered = RegisteredFiles()  # the index the discovery sensor keeps beside the manifests
    registered.add([_manifest(i, source_root) for i in range(stop)])
    campaign.put(registered.save, campaign.uri("manifests"))
    campaign.versions.update(zip(range(start, stop), made, strict=True))
    signatures = {campaign.uri("minhash_signatures", group_key(i)): campaign.versions[i][
        "minhash_signatures"] for i in range(stop)}  # fmt: skip
    clusters = _write_identity(campaign, "dedup_clusters", (), signatures)
    if start == 0:  # the basis is made once, from the first groups
        _write_identity(campaign, "experiment_basis", (), {})
        campaign.basis_groups = int(stop * BASIS_SHARE)
        basis = {"shard_groups": [group_key(i) for i in range(campaign.basis_groups)],
                 "seq_len": 256, "reserve": {}, "yardsticks": {}}  # fmt: skip
        campaign.put(storage.write_json, basis, campaign.uri("experiment_basis", "basis.json"))
    basis_version = version("experiment_basis", (), {})
    campaign.globals.update(dedup_clusters=clusters, experiment_basis=basis_version)

    def downstream(i: int) -> None:
        g, v = group_key(i), campaign.versions[i]
        v["dedup_clusters"] = clusters
        v["deduped_shards"] = _write_identity(campaign, "deduped_shards", (g,), {
            campaign.uri("filtered_shards", g): v["filtered_shards"],
            campaign.uri("dedup_clusters"): clusters,
        })  # fmt: skip
        v["proxy_pools"] = _write_identity(campaign, "proxy_pools", (g,), {
            campaign.uri("deduped_shards", g): v["deduped_shards"],
            campaign.uri("experiment_basis"): basis_version,
        })  # fmt: skip
        campaign.put(storage.write_json, [{"group": g, "source": SOURCE, "documents": 100,
                             "excluded_documents": 0, "sequences": 40, "tokens": 10240,
                             "seq_len": 256, "tokenizer_sha256": "bench",
                             "path": campaign.uri("proxy_pools", g, SOURCE)}],
                     campaign.uri("proxy_pools", g, "pool.json"))  # fmt: skip
        if i >= campaign.basis_groups and "data_admission" not in v:  # decided after the basis
            decision = "reject" if i % 50 == 0 else "admit"
            campaign.put(storage.write_json, {"group": g, "decision": decision,
                         "reason": "bench"}, campaign.uri("data_admission", g, "decision.json"))  # fmt: skip
            v["data_admission"] = version("data_admission", g, decision)

    for i in range(stop):
        downstream(i)
    return campaign.versions


def write_experiments(campaign: Campaign, count: int) -> list[str]:
    names = []
    for i in range(count):
        name = f"mix-bench{i:04d}-s0"
        spec = ExperimentSpec(name=name, variant=DataVariant(weights={SOURCE: 1.0}),
                              recipe="proxy_cpu", seed=0, kind="manual", group="bench")  # fmt: skip
        campaign.put(storage.write_bytes, spec.to_json().encode(),
                     campaign.uri("experiment_specs", f"{name}.json"))  # fmt: skip
        names.append(name)
    return names


def write_checkpoints(campaign: Campaign, steps: list[int]) -> None:
    """Committed checkpoints of the newest steps, as the trainer commits them (files and a
    commit record of their sizes and xxh3 checksums): ``pretrain status`` verifies them."""
    import xxhash

    for step in steps[-KEEP_ON_DISK:]:
        where = campaign.uri("runs", "b00", f"step-{step:08d}")
        meta = {"step": step, "branch": "b00", "key": f"b00-s{step:09d}",
                "tokens_seen": step * 1_000_000}  # fmt: skip
        files = {".metadata": b"\0" * 512, "__0_0.distcp": b"\1" * 65536,
                 "meta.json": json.dumps(meta).encode()}  # fmt: skip
        for name, data in files.items():
            storage.write_bytes(data, storage.join(where, name))
        records = {name: {"size": len(data), "xxh3_64": xxhash.xxh3_64(data).hexdigest()}
                   for name, data in files.items()}  # fmt: skip
        storage.commit_marker(where, {"files": records})


# -- the instance ---------------------------------------------------------------------------------


class Writer:
    """Run records and reported materializations into ``instance``; materializations are kept
    until :meth:`flush` or another asset's, then written as one batch (see :func:`fast_writes`)."""

    def __init__(self, instance: DagsterInstance, campaign: Campaign) -> None:
        self.instance, self.campaign = instance, campaign
        self.batch: list[AssetMaterialization] = []

    def run(
        self, job: str, tags: dict[str, str], status: DagsterRunStatus = DagsterRunStatus.SUCCESS
    ) -> str:  # noqa: E501
        run_id = str(uuid.uuid4())  # the job of an asset is named after it (raw_shards_job)
        name = job if job == "train" else job_name(job)
        self.instance.add_run(DagsterRun(job_name=name, run_id=run_id, status=status, tags=tags))
        self.campaign.runs += 1
        return run_id

    def materialize(self, asset: str, partition: str | None, data_version: str,
                    inputs: dict[str, tuple[str, bool]], run_id: str, job: str) -> None:  # fmt: skip
        """``inputs``: upstream asset -> (its data version, partitioned?)."""
        tags = {DATA: data_version, CODE: self.campaign.code_versions.get(asset, "none")}
        for upstream, (v, partitioned) in inputs.items():
            tags[INPUT + upstream] = partitions_version(v) if partitioned else v
            tags[POINTER + upstream] = self._pointer(upstream)
        metadata = {"bench": True, "made_by_run": run_id, "job": job}
        event = AssetMaterialization(asset_key=asset, partition=partition, tags=tags,
                                     metadata=metadata)  # fmt: skip
        if self.batch and (self.batch[-1].asset_key != event.asset_key
                           or len(self.batch) >= EVENT_BATCH):  # fmt: skip
            self.flush()
        self.batch.append(event)
        self.campaign.events += 1

    def flush(self) -> None:
        """Report the kept materializations (all of one asset) as one batch: what
        ``report_runless_asset_event`` writes, through the instance's batch writing."""
        events, self.batch = self.batch, []
        if events:
            report_materialization_batch(self.instance, events)

    def batched_runs(self, asset: str, first: int, stop: int) -> Iterator[tuple[int, str]]:
        """Groups ``first..stop-1`` with the run that made each: one run per
        ``PARTITIONS_PER_RUN`` groups, tagged with its partition range as a backfill's is."""
        for i in range(first, stop):
            if (i - first) % PARTITIONS_PER_RUN == 0:
                last = group_key(min(i + PARTITIONS_PER_RUN, stop) - 1)
                run = self.run(asset, {"dagster/asset_partition_range_start": group_key(i),
                                       "dagster/asset_partition_range_end": last})  # fmt: skip
            yield i, run

    def _pointer(self, asset: str) -> str:
        """A storage id of ``asset``'s materializations (Dagster records the newest there was
        when the input was read; looked up once per asset and build)."""
        if asset not in self.campaign.pointer:
            self.flush()
            records = self.instance.get_asset_records([AssetKey(asset)])
            last = records[0].asset_entry.last_materialization_record if records else None
            self.campaign.pointer[asset] = last.storage_id if last else 0
        return str(self.campaign.pointer[asset] or "NULL")


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@contextlib.contextmanager
def fast_writes(instance: DagsterInstance) -> Iterator[DagsterInstance]:
    """An instance to write the history with: the same storage and the same rows, written faster.

    - Dagster's batch writing is on (``DAGSTER_EVENT_BATCH_SIZE``): :meth:`Writer.flush` sends
      one asset's materializations as a batch, one ``INSERT`` on Postgres (on SQLite, Dagster
      still writes them one by one).
    - Postgres: a second instance on the same storage holds its connection, as
      ``dagster-webserver`` does (``optimize_for_webserver``); the one yielded is that instance,
      so the sensors measured later still use the daemon's connection per query.
    - SQLite: no disk sync per transaction, and one engine per database file for the build
      (Dagster makes an engine per connection, so SQLAlchemy compiles every statement anew).
    """
    with contextlib.ExitStack() as stack:
        stack.enter_context(_env("DAGSTER_EVENT_BATCH_SIZE", str(EVENT_BATCH + 1)))
        stack.enter_context(fast_sqlite())
        stack.enter_context(one_sqlite_engine_per_file())
        if type(instance.run_storage).__module__.startswith("dagster_postgres"):
            held = DagsterInstance.from_ref(instance.get_ref())
            stack.callback(held.dispose)
            held.optimize_for_webserver(statement_timeout=0, pool_recycle=3600, max_overflow=20)
            yield held
        else:
            yield instance


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    import os

    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextlib.contextmanager
def fast_sqlite() -> Iterator[None]:
    """SQLite without a disk sync per transaction while the history is written (the rows are
    the same; only the build is faster). Every new SQLite connection gets the pragma."""
    import sqlalchemy
    from sqlalchemy import event

    def pragma(connection: Any, _: Any) -> None:
        if "sqlite" in type(connection).__module__:
            cursor = connection.cursor()
            cursor.execute("PRAGMA synchronous=OFF")
            cursor.close()

    event.listen(sqlalchemy.engine.Engine, "connect", pragma)
    try:
        yield
    finally:
        event.remove(sqlalchemy.engine.Engine, "connect", pragma)


def build(instance: DagsterInstance, campaign: Campaign, groups: int, *, source_root: str,
          checkpoints: int = 1000, experiments: int = 500,
          min_runs: int = 20_000) -> dict[str, Any]:  # fmt: skip
    """Grow ``instance`` and the store to ``groups`` shard groups (see the module docstring).
    Returns what was built and how long it took: ``instance_s`` writing the instance,
    ``store_s`` until the last file of the store was written (in the background, meanwhile)."""
    started = time.perf_counter()
    start = campaign.groups
    keys = [group_key(i) for i in range(start, groups)]
    for chunk in _chunks(keys, 1000):
        instance.add_dynamic_partitions("shards", chunk)
    with campaign.background_writes():
        versions = write_store(campaign, start, groups, source_root)
        with fast_writes(instance) as held:
            writer = Writer(held, campaign)
            campaign.pointer.clear()
            _history(writer, start, groups, versions)
            if start == 0:
                _checkpoints_and_experiments(held, campaign, writer, checkpoints, experiments)
            for i in range(max(0, min_runs - campaign.runs)):  # earlier attempts, failed
                job = SHARD_STAGES[i % len(SHARD_STAGES)]
                writer.run(job, {"dagster/partition": group_key(i % max(groups, 1))},
                           status=DagsterRunStatus.FAILURE)  # fmt: skip
            writer.flush()
        t_instance = time.perf_counter()
    campaign.groups = groups
    return {"groups": groups, "runs": campaign.runs, "events": campaign.events,
            "instance_s": round(t_instance - started, 1),
            "store_s": round(time.perf_counter() - started, 1)}  # fmt: skip


def _history(writer: Writer, start: int, groups: int, versions: dict[int, dict]) -> None:
    """The shard stages' runs and materializations: the whole chain of each new group, and every
    group's deduped shard and pool (a new ``dedup_clusters`` remakes them all)."""
    campaign = writer.campaign
    globals_ = {a: version(a, (), {}) for a in ("quality_classifier", "toxicity_classifier")}
    clusters, basis = campaign.globals["dedup_clusters"], campaign.globals["experiment_basis"]
    if start == 0:
        run = writer.run("quality_classifier", {})
        for asset, v in globals_.items():
            writer.materialize(asset, None, v, {}, run, asset)
        run = writer.run("experiment_basis", {})
        writer.materialize("experiment_basis", None, basis, {}, run, "experiment_basis")
    run = writer.run("dedup_clusters", {})
    writer.materialize("dedup_clusters", None, clusters, {}, run, "dedup_clusters")
    for i, run in writer.batched_runs("raw_shards", start, groups):
        writer.materialize("raw_shards", group_key(i), versions[i]["raw_shards"], {}, run,
                           "raw_shards")  # fmt: skip
    filtered = list(writer.batched_runs("filtered_shards", start, groups))
    for i, run in filtered:
        v = versions[i]
        writer.materialize("filtered_shards", group_key(i), v["filtered_shards"], {
            "raw_shards": (v["raw_shards"], True),
            **{a: (globals_[a], False) for a in globals_}}, run, "filtered_shards")  # fmt: skip
    for i, run in filtered:  # the same run makes the signatures
        v = versions[i]
        writer.materialize("minhash_signatures", group_key(i), v["minhash_signatures"], {
            "filtered_shards": (v["filtered_shards"], True)}, run, "filtered_shards")  # fmt: skip
    for i, run in writer.batched_runs("deduped_shards", 0, groups):
        v = versions[i]
        writer.materialize("deduped_shards", group_key(i), v["deduped_shards"], {
            "filtered_shards": (v["filtered_shards"], True),
            "dedup_clusters": (clusters, False)}, run, "deduped_shards")  # fmt: skip
    for i, run in writer.batched_runs("proxy_pools", 0, groups):
        v = versions[i]
        writer.materialize("proxy_pools", group_key(i), v["proxy_pools"], {
            "deduped_shards": (v["deduped_shards"], True),
            "experiment_basis": (basis, False)}, run, "proxy_pools")  # fmt: skip
    for i in range(groups):
        v = versions[i]
        if "data_admission" in v and (i >= start or i >= campaign.basis_groups and not start):
            run = writer.run("data_admission", {"dagster/partition": group_key(i)})
            writer.materialize("data_admission", group_key(i), v["data_admission"], {}, run,
                               "data_admission")  # fmt: skip
    writer.flush()


def _checkpoints_and_experiments(instance: DagsterInstance, campaign: Campaign, writer: Writer,
                                 checkpoints: int, experiments: int) -> None:  # fmt: skip
    steps = [CHECKPOINT_EVERY * (i + 1) for i in range(checkpoints)]
    keys = [f"b00-s{s:09d}" for s in steps]
    for chunk in _chunks(keys, 1000):
        instance.add_dynamic_partitions("checkpoints", chunk)
    train = writer.run("train", {})
    tokenizer = version("tokenizer", (), {})
    writer.materialize("tokenizer", None, tokenizer, {}, writer.run("tokenizer", {}), "tokenizer")
    for key in keys:
        writer.materialize("checkpoints", key, version("checkpoints", key), {}, train, "train")
    for key in keys:
        run = writer.run("eval_reports", {"dagster/partition": key})
        writer.materialize("eval_reports", key, version("eval_reports", key), {
            "checkpoints": (version("checkpoints", key), True),
            "tokenizer": (tokenizer, False)}, run, "eval_reports")  # fmt: skip
    write_checkpoints(campaign, steps)
    names = write_experiments(campaign, experiments)
    for chunk in _chunks(names, 1000):
        instance.add_dynamic_partitions("experiments", chunk)
    for name in names:
        run = writer.run("proxy_runs", {"dagster/partition": name})
        writer.materialize("proxy_runs", name, version("proxy_runs", name), {}, run, "proxy_runs")
