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
- a run history: one run per group of ``raw_shards`` and ``filtered_shards``, one run per 25
  groups of ``deduped_shards`` and ``proxy_pools`` (each new ``dedup_clusters`` remakes them
  all), one ``eval_reports`` per checkpoint, one ``proxy_runs`` per experiment (each asset's
  job, ``<asset>_job``), and failed earlier attempts
  of the shard stages until there are ``min_runs`` runs;
- in the artifact store (a folder or ``s3://``), the files the sensors and the CLI read: each
  group's manifest and identity chain (``raw → filtered → signatures → dedup_clusters → deduped
  → pools``, the chain :func:`pretrain.identity.is_current` walks), the experiment basis,
  decisions for the groups admitted after it, experiment specs and results, and committed
  checkpoints of the newest steps (keep-last-K) for ``pretrain status``.

Materializations are *reported* (``report_runless_asset_event``, Dagster's public API for
events made outside a run): they land in the same asset index a run's events do, which is what
the sensors, the backfill schedule and the UI's asset pages read; the runs are run records
(``add_run``) for the runs page and every run query. Events attached to runs would need Dagster's
private event classes, and on SQLite one database file per run (40,000 files: hours to make).

    build(instance, store_root, groups=1000)            # grows an instance to 1,000 groups
    build(instance, store_root, groups=10000)           # and then to 10,000
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dagster import AssetKey, AssetMaterialization, DagsterInstance, DagsterRun, DagsterRunStatus

from foundation.stages import job_name
from pretrain import identity, storage
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
BATCH = 25  # groups a run of deduped_shards and proxy_pools remade together


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

    def uri(self, *parts: str) -> str:
        return storage.join(self.store_root, *parts)


# -- the artifact store ---------------------------------------------------------------------------


def _write_identity(campaign: Campaign, stage: str, parts: tuple[str, ...],
                    inputs: dict[str, str]) -> str:  # fmt: skip
    ident = Identity(stage=stage, code_version=campaign.code_versions.get(stage, "none"),
                     config_hash="bench", inputs=inputs, version=version(stage, parts, inputs))  # fmt: skip
    identity.write(campaign.uri(stage, *parts), ident)
    return ident.version


def _group_files(campaign: Campaign, i: int, source_root: str) -> dict[str, str]:
    """One group's manifest and identity chain; returns the versions by stage."""
    g = group_key(i)
    files = tuple(RawFile(uri=storage.join(source_root, f"{g}-{j}.jsonl"), source=SOURCE,
                          kind="jsonl") for j in range(FILES_PER_GROUP))  # fmt: skip
    storage.write_bytes(ShardManifest(key=g, files=files).to_json().encode(),
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


def _write_source(source_root: str, i: int) -> None:
    for j in range(FILES_PER_GROUP):
        storage.write_bytes(
            b'{"text": "a"}\n', storage.join(source_root, f"{group_key(i)}-{j}.jsonl")
        )


def _parallel(fn, items: Iterable[Any], threads: int) -> list[Any]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, items))


def write_store(campaign: Campaign, start: int, stop: int, source_root: str) -> dict[int, dict]:
    """The files of groups ``start..stop-1``, the global ones the first time, and a new
    ``dedup_clusters`` over every group, which makes every deduped shard and pool anew (as a
    rerun of dedup does). Returns each group's versions by stage."""
    threads = 16 if storage.is_s3(campaign.store_root) else 1
    if start == 0:
        for stage in ("quality_classifier", "toxicity_classifier"):
            _write_identity(campaign, stage, (), {})
    _parallel(lambda i: _write_source(source_root, i), range(start, stop), threads)
    made = _parallel(lambda i: _group_files(campaign, i, source_root), range(start, stop), threads)
    campaign.versions.update(zip(range(start, stop), made, strict=True))
    signatures = {campaign.uri("minhash_signatures", group_key(i)): campaign.versions[i][
        "minhash_signatures"] for i in range(stop)}  # fmt: skip
    clusters = _write_identity(campaign, "dedup_clusters", (), signatures)
    if start == 0:  # the basis is made once, from the first groups
        _write_identity(campaign, "experiment_basis", (), {})
        campaign.basis_groups = int(stop * BASIS_SHARE)
        basis = {"shard_groups": [group_key(i) for i in range(campaign.basis_groups)],
                 "seq_len": 256, "reserve": {}, "yardsticks": {}}  # fmt: skip
        storage.write_json(basis, campaign.uri("experiment_basis", "basis.json"))
    basis_version = version("experiment_basis", (), {})

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
        storage.write_json([{"group": g, "source": SOURCE, "documents": 100,
                             "excluded_documents": 0, "sequences": 40, "tokens": 10240,
                             "seq_len": 256, "tokenizer_sha256": "bench",
                             "path": campaign.uri("proxy_pools", g, SOURCE)}],
                           campaign.uri("proxy_pools", g, "pool.json"))  # fmt: skip
        if i >= campaign.basis_groups and "data_admission" not in v:  # decided after the basis
            decision = "reject" if i % 50 == 0 else "admit"
            storage.write_json({"group": g, "decision": decision, "reason": "bench"},
                               campaign.uri("data_admission", g, "decision.json"))  # fmt: skip
            v["data_admission"] = version("data_admission", g, decision)

    _parallel(downstream, range(stop), threads)
    return campaign.versions


def write_experiments(campaign: Campaign, count: int) -> list[str]:
    names = []
    for i in range(count):
        name = f"mix-bench{i:04d}-s0"
        spec = ExperimentSpec(name=name, variant=DataVariant(weights={SOURCE: 1.0}),
                              recipe="proxy_cpu", seed=0, kind="manual", group="bench")  # fmt: skip
        storage.write_bytes(
            spec.to_json().encode(), campaign.uri("experiment_specs", f"{name}.json")
        )
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
    """Run records and reported materializations into ``instance``."""

    def __init__(self, instance: DagsterInstance, campaign: Campaign) -> None:
        self.instance, self.campaign = instance, campaign

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
        self.instance.report_runless_asset_event(
            AssetMaterialization(asset_key=asset, partition=partition, tags=tags, metadata=metadata)
        )
        self.campaign.events += 1

    def _pointer(self, asset: str) -> str:
        """A storage id of ``asset``'s materializations (Dagster records the newest there was
        when the input was read; looked up once per asset and build)."""
        if asset not in self.campaign.pointer:
            records = self.instance.get_asset_records([AssetKey(asset)])
            last = records[0].asset_entry.last_materialization_record if records else None
            self.campaign.pointer[asset] = last.storage_id if last else 0
        return str(self.campaign.pointer[asset] or "NULL")


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


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
    """Grow ``instance`` and the store to ``groups`` shard groups (see the module docstring)."""
    with fast_sqlite():
        return _build(
            instance,
            campaign,
            groups,
            source_root=source_root,
            checkpoints=checkpoints,
            experiments=experiments,
            min_runs=min_runs,
        )


def _build(
    instance: DagsterInstance,
    campaign: Campaign,
    groups: int,
    *,
    source_root: str,
    checkpoints: int,
    experiments: int,
    min_runs: int,
) -> dict[str, Any]:
    started = time.perf_counter()
    start = campaign.groups
    keys = [group_key(i) for i in range(start, groups)]
    for chunk in _chunks(keys, 1000):
        instance.add_dynamic_partitions("shards", chunk)
    versions = write_store(campaign, start, groups, source_root)
    t_store = time.perf_counter()
    writer = Writer(instance, campaign)
    campaign.pointer.clear()
    if start == 0:
        run = writer.run("quality_classifier", {})
        for asset in ("quality_classifier", "toxicity_classifier"):
            writer.materialize(asset, None, version(asset, (), {}), {}, run, asset)
        run = writer.run("experiment_basis", {})
        basis = identity.read(campaign.uri("experiment_basis"))
        assert basis is not None
        writer.materialize("experiment_basis", None, basis.version, {}, run, "experiment_basis")
    clusters = identity.read(campaign.uri("dedup_clusters"))
    assert clusters is not None
    writer.materialize(
        "dedup_clusters",
        None,
        clusters.version,
        {},
        writer.run("dedup_clusters", {}),
        "dedup_clusters",
    )
    basis = identity.read(campaign.uri("experiment_basis"))
    assert basis is not None
    globals_ = {a: version(a, (), {}) for a in ("quality_classifier", "toxicity_classifier")}
    for i in range(groups):
        g, v = group_key(i), versions[i]
        if i >= start:  # a new group: its whole chain
            run = writer.run("raw_shards", {"dagster/partition": g})
            writer.materialize("raw_shards", g, v["raw_shards"], {}, run, "raw_shards")
            run = writer.run("filtered_shards", {"dagster/partition": g})
            writer.materialize("filtered_shards", g, v["filtered_shards"], {
                "raw_shards": (v["raw_shards"], True),
                **{a: (globals_[a], False) for a in globals_}}, run, "filtered_shards")  # fmt: skip
            writer.materialize("minhash_signatures", g, v["minhash_signatures"], {
                "filtered_shards": (v["filtered_shards"], True)}, run, "filtered_shards")  # fmt: skip
        # every group's deduped shard and pool (a new dedup_clusters remakes them all), by
        # backfills of BATCH groups a run
        if i % BATCH == 0:
            last = group_key(min(i + BATCH, groups) - 1)
            batch = {"dagster/asset_partition_range_start": g,
                     "dagster/asset_partition_range_end": last}  # fmt: skip
            dedup_run, pools_run = (
                writer.run("deduped_shards", batch),
                writer.run("proxy_pools", batch),
            )
        writer.materialize("deduped_shards", g, v["deduped_shards"], {
            "filtered_shards": (v["filtered_shards"], True),
            "dedup_clusters": (clusters.version, False)}, dedup_run, "deduped_shards")  # fmt: skip
        writer.materialize("proxy_pools", g, v["proxy_pools"], {
            "deduped_shards": (v["deduped_shards"], True),
            "experiment_basis": (basis.version, False)}, pools_run, "proxy_pools")  # fmt: skip
        if "data_admission" in v and (i >= start or i >= campaign.basis_groups and not start):
            run = writer.run("data_admission", {"dagster/partition": g})
            writer.materialize("data_admission", g, v["data_admission"], {}, run, "data_admission")
    if start == 0:
        _checkpoints_and_experiments(instance, campaign, writer, checkpoints, experiments)
    done = campaign.runs
    filler = max(0, min_runs - done)
    for i in range(filler):  # earlier attempts of the shard stages (failed, then retried)
        job = SHARD_STAGES[i % len(SHARD_STAGES)]
        writer.run(job, {"dagster/partition": group_key(i % max(groups, 1))},
                   status=DagsterRunStatus.FAILURE)  # fmt: skip
    campaign.groups = groups
    return {"groups": groups, "runs": campaign.runs, "events": campaign.events,
            "store_s": round(t_store - started, 1),
            "instance_s": round(time.perf_counter() - t_store, 1)}  # fmt: skip


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
        ckpt = version("checkpoints", key)
        writer.materialize("checkpoints", key, ckpt, {}, train, "train")
        run = writer.run("eval_reports", {"dagster/partition": key})
        writer.materialize("eval_reports", key, version("eval_reports", key), {
            "checkpoints": (ckpt, True), "tokenizer": (tokenizer, False)}, run, "eval_reports")  # fmt: skip
    write_checkpoints(campaign, steps)
    names = write_experiments(campaign, experiments)
    for chunk in _chunks(names, 1000):
        instance.add_dynamic_partitions("experiments", chunk)
    for name in names:
        run = writer.run("proxy_runs", {"dagster/partition": name})
        writer.materialize("proxy_runs", name, version("proxy_runs", name), {}, run, "proxy_runs")
