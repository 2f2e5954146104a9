"""Shared test helpers (moved from test_fault_injection.py); tests import these, never each other."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dagster import (
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunRequest,
    build_run_status_sensor_context,
    build_sensor_context,
)

from foundation.train_config import TrainRunConfig, resolve_train_config
from pretrain import storage
from pretrain.packing.ledger import BatchPlan, step_sequences
from pretrain.packing.stream import LEDGER_SCHEMA
from pretrain.recovery.wandb_file import read_history
from pretrain.run_files import offline_run_files, wandb_run_id
from resources.launcher import TorchrunLauncher
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from resources.slurm import SlurmLauncher
from resources.storage import ArtifactStore
from sensors.recovery.failure import training_failure_sensor
from sensors.recovery.loss_spike import loss_spike_sensor
from tests.helpers.training import SEQ_LEN, VOCAB, make_packed
from tests.servers.training_jobs import SlurmJob, TorchrunJob, TrainingJob

BATCH = {"micro_batch_size": 4, "global_batch_sequences": 8}


POLICY = {"health_window_steps": 5, "rollback_margin_steps": 2}


def make_poisoned_packed(root: Path, poison_steps: list[int], num_train: int = 1200) -> set[str]:
    """Learnable packed tokens (one document per sequence, source ``web``) whose sequences read at
    ``poison_steps`` are random tokens (documents ``poison-*``, source ``poison``), with a ledger.
    Returns the poisoned document ids. ``num_train`` keeps every test inside one epoch."""
    make_packed(root, num_train=num_train)
    plan = BatchPlan(global_batch=BATCH["global_batch_sequences"], micro_batch=4, world_size=2)
    poisoned = sorted(set(step_sequences(str(root), plan, poison_steps)["seq_index"].to_pylist()))
    tokens = np.fromfile(root / "train-00000.bin", dtype="<u2").reshape(num_train, SEQ_LEN)
    tokens[poisoned] = np.random.default_rng(7).integers(3, VOCAB, (len(poisoned), SEQ_LEN))
    tokens.tofile(root / "train-00000.bin")
    bad = set(poisoned)
    doc_ids = [f"poison-{i:05d}" if i in bad else f"web-{i:05d}" for i in range(num_train)]
    ledger = pa.table(
        {
            "seq_index": pa.array(range(num_train), pa.int64()),
            "doc_id": doc_ids,
            "source": ["poison" if i in bad else "web" for i in range(num_train)],
            "source_id": pa.nulls(num_train, pa.string()),  # no input ids in this fixture
            "epoch": pa.array([0] * num_train, pa.int32()),
            "token_start": pa.array([0] * num_train, pa.int32()),
            "token_end": pa.array([SEQ_LEN] * num_train, pa.int32()),
            "doc_token_offset": pa.array([0] * num_train, pa.int64()),
            "split": ["train"] * num_train,
            "stage": pa.array([0] * num_train, pa.int32()),
        },
        schema=LEDGER_SCHEMA,
    )
    pq.write_table(ledger, root / "ledger.parquet")
    return {doc_ids[i] for i in poisoned}


def with_tokenizer_and_identity(artifacts: Path) -> None:
    """Give ``artifacts/packed_tokens`` (from :func:`make_poisoned_packed`) what the corpus
    assets leave beside it: a byte-level tokenizer whose sha256 the index names (its vocabulary
    covers the fixture's token ids), and an identity for both, so that ``eval_reports`` of the
    campaign's checkpoints runs as in a real campaign instead of refusing its inputs."""
    from pretrain import identity
    from tests.helpers.eval_models import train_tiny_tokenizer

    folder, tok = train_tiny_tokenizer(artifacts / "tokenizer")
    packed = artifacts / "packed_tokens"
    index = json.loads((packed / "index.json").read_text())
    index["tokenizer_sha256"] = hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()
    index["vocab_size"] = tok.get_vocab_size()  # the model's; the fixture's ids stay < VOCAB
    (packed / "index.json").write_text(json.dumps(index))
    identity.adopt(str(folder), "tokenizer")
    identity.adopt(str(packed), "packed_tokens")


@dataclasses.dataclass
class Launch:
    run_id: str
    branch: str
    job: TrainingJob
    events: str  # the run root's events.jsonl (a path or an s3:// URI)
    terminated: bool = False


class Campaign:
    def __init__(
        self,
        instance: DagsterInstance,
        artifacts: Path | str,
        policy: dict[str, float],
        slurm: SlurmLauncher | None = None,
        submit_dir: Path | None = None,
        **inject: Any,
    ) -> None:
        """``slurm``: run each launch as a Slurm job through this launcher (else local torchrun).
        ``artifacts`` may be ``s3://`` (Slurm only): every run file is then read from S3, and
        ``submit_dir`` (local) holds the batch scripts and job logs."""
        self.instance, self.inject, self.slurm = instance, inject, slurm
        self.store = ArtifactStore(root=str(artifacts))
        # Path locally (tests join with /), the URI string on S3
        self.run_root: Any = (
            self.store.uri("runs")
            if storage.is_s3(str(artifacts))
            else Path(self.store.local_dir("runs"))
        )
        self.submit_dir = submit_dir
        self.resources = {
            "metrics": WandbMetricsReader(run_root=str(self.run_root)),
            "recovery": RecoveryThresholds(policy=policy),
        }
        self.launcher = TorchrunLauncher(nproc_per_node=2)
        self.cursor: str | None = None
        self.requests: list[RunRequest] = []  # every request of every tick, duplicates included
        self.queue: list[RunRequest] = []
        self.launched_keys: set[str] = set()
        self.active: Launch | None = None
        self.finished: dict[str, DagsterRunStatus] = {}
        self.results: list[Any] = []  # every loss_spike_sensor result the "daemon" kept
        self.dropped: list[Any] = []  # results of the duplicate evaluations (cursor not kept)
        self.duplicate_ticks = False

    # launching, as the training op does it
    def launch(self, op_config: dict[str, Any], tags: dict[str, str] | None = None) -> str:
        run_id = str(uuid.uuid4())
        run_config = {"ops": {"train_model": {"config": op_config}}}
        self.instance.add_run(
            DagsterRun(
                job_name="train",
                run_id=run_id,
                status=DagsterRunStatus.STARTED,
                run_config=run_config,
                tags=tags or {},
            )
        )
        cfg = resolve_train_config(TrainRunConfig(**op_config), self.store)
        if self.inject:
            cfg = cfg.replace(run=dataclasses.replace(cfg.run, **self.inject))
        branch_uri = storage.join(str(self.run_root), cfg.run.branch)
        config_path = storage.join(branch_uri, f"run-{run_id}.json")
        storage.write_bytes(cfg.to_json().encode(), config_path)
        if self.slurm is not None:
            log_dir = (
                Path(branch_uri) if self.submit_dir is None else self.submit_dir / cfg.run.branch
            )
            job: TrainingJob = SlurmJob(self.slurm, config_path, log_dir)
        else:
            log_path = Path(branch_uri) / f"torchrun-{run_id}.log"
            job = TorchrunJob(self.launcher, Path(config_path), log_path)
        print(f"{time.monotonic():.1f} launch {cfg.run.branch}", flush=True)
        # the run root's events.jsonl: on S3, the trainer's mirror of its staging copy
        events = storage.join(branch_uri, "events.jsonl")
        self.active = Launch(run_id=run_id, branch=cfg.run.branch, job=job, events=events)
        return run_id

    def request(self, requests: list[RunRequest]) -> None:
        """The daemon's side of a sensor result: one run per run_key, ever."""
        for request in requests:
            self.requests.append(request)
            if request.run_key not in self.launched_keys:
                self.launched_keys.add(request.run_key)
                self.queue.append(request)

    def tick(self) -> None:
        context = build_sensor_context(
            instance=self.instance, cursor=self.cursor, resources=self.resources
        )
        result = loss_spike_sensor(context)
        self.results.append(result)
        self.request(result.run_requests)
        if self.duplicate_ticks:
            # the daemon re-evaluating a tick whose cursor it did not store, and a sensor
            # restarted with its cursor reset: neither may request a second resume run
            for cursor in (self.cursor, None):
                again = loss_spike_sensor(
                    build_sensor_context(
                        instance=self.instance, cursor=cursor, resources=self.resources
                    )
                )
                self.request(again.run_requests)
                self.dropped.append(again)
        self.cursor = result.cursor

    def end_run(self, launch: Launch) -> None:
        status = self.instance.get_run_by_id(launch.run_id).status
        run = self.instance.get_run_by_id(launch.run_id)
        events = [json.loads(line) for line in storage.read_bytes(launch.events).splitlines()]
        if status == DagsterRunStatus.CANCELING:
            self.instance.report_run_canceled(run)
        elif launch.job.returncode == 0 and events[-1]["event"] == "finished":
            self.instance.report_dagster_event(
                DagsterEvent(DagsterEventType.RUN_SUCCESS.value, job_name="train"),
                run_id=launch.run_id,
            )
        else:
            self.instance.report_run_failed(run, f"torchrun exit code {launch.job.returncode}")
            [entry] = self.instance.all_logs(launch.run_id, of_type=DagsterEventType.RUN_FAILURE)
            for _ in range(2 if self.duplicate_ticks else 1):  # a duplicate evaluation too
                context = build_run_status_sensor_context(
                    sensor_name="training_failure_sensor",
                    dagster_event=entry.dagster_event,
                    dagster_instance=self.instance,
                    dagster_run=self.instance.get_run_by_id(launch.run_id),
                    resources=self.resources,
                ).for_run_failure()
                self.request(training_failure_sensor(context).run_requests)
        self.finished[launch.run_id] = self.instance.get_run_by_id(launch.run_id).status

    def drive(self, timeout_s: float = 170.0, on_step: Any = None) -> None:
        """Tick, stop, end and launch runs until nothing runs and nothing is queued."""
        deadline = time.monotonic() + timeout_s
        while True:
            assert time.monotonic() < deadline, "campaign did not settle"
            launch = self.active
            if launch is not None:
                if on_step is not None:
                    on_step(self, launch)
                status = self.instance.get_run_by_id(launch.run_id).status
                if status == DagsterRunStatus.CANCELING and not launch.terminated:
                    launch.terminated = True  # what the op does when the run is terminated
                    print(f"{time.monotonic():.1f} SIGTERM {launch.branch}", flush=True)
                    launch.job.stop()
                    print(f"{time.monotonic():.1f} stopped {launch.branch}", flush=True)
                if launch.job.poll() is not None:
                    print(f"{time.monotonic():.1f} ended {launch.branch}", flush=True)
                    self.active = None
                    self.end_run(launch)
            self.tick()
            if self.active is None and self.queue:
                request = self.queue.pop(0)
                self.launch(request.run_config["ops"]["train_model"]["config"], request.tags)
            elif self.active is None:
                return
            time.sleep(0.3)

    # reading back what happened
    def history(self, branch: str) -> list[list[dict[str, Any]]]:
        """Each offline W&B file of ``branch`` (one per start), its rows in order."""
        run_id = wandb_run_id(self.run_root, branch)
        return [read_history(p)[0] for p in offline_run_files(self.run_root, run_id)]

    def events(self, branch: str) -> list[dict[str, Any]]:
        path = storage.join(str(self.run_root), branch, "events.jsonl")
        return [json.loads(line) for line in storage.read_bytes(path).splitlines()]

    def runs(self) -> list[DagsterRun]:
        return list(reversed(self.instance.get_runs()))


def train_config(
    *,
    max_steps: int,
    checkpoint_every: int = 10,
    healthy_every: int | None = None,
    branch: str | None = None,
) -> dict[str, Any]:
    """The ``train_model`` launch config (the job's nested TrainRunConfig) of these tests."""
    checkpoint = {"every_steps": checkpoint_every}
    if healthy_every is not None:
        checkpoint["healthy_every_steps"] = healthy_every
    run = {"max_steps": max_steps, "resume": "none", **({"branch": branch} if branch else {})}
    return {"run": run, "checkpoint": checkpoint, "data": dict(BATCH)}


def final_loss(rows: list[dict[str, Any]], last: int = 8) -> float:
    losses = [r["train/loss"] for r in rows if "train/loss" in r][-last:]
    return float(np.mean(losses))
