"""Training on Slurm with nothing shared between Dagster and the nodes but S3 (moto_server).

The op side opens Pipes through dagster-aws (``PipesS3ContextInjector`` +
``PipesS3MessageReader``, S3 settings from ``dagster_aws.s3.S3Resource``); the Slurm job gets
an ``s3://`` run config, ``s3://`` packed tokens and the credentials the launcher passes as
``AWS_*`` variables (the op's own environment has none). The trainer stages the packed tokens
into a node-local cache and reports checkpoints back through S3.

End to end, the real ``train`` job with an ``s3://`` artifact root and nothing else: the op
sizes the model from ``index.json`` alone, writes the run config to S3, the job trains from S3
tokens and commits its checkpoints to ``s3://`` while ``checkpoints[...]`` partitions appear;
a second launch resumes from the last committed step on S3, and ``hf_export`` reads it there.

    pytest -q tests/dagster/test_slurm_s3.py
"""

import dataclasses
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from dagster import (
    AssetKey,
    DagsterEventType,
    OpExecutionContext,
    instance_for_test,
    job,
    materialize,
    op,
)
from dagster_aws.s3 import S3Resource

from foundation.train_config import TrainRunConfig, resolve_train_config
from jobs.training import train_job
from pretrain import identity, storage
from pretrain.checkpoint import dcp as ckpt
from pretrain_assets.export import hf_export
from resources.storage import ArtifactStore
from tests.helpers.eval_models import train_tiny_tokenizer
from tests.helpers.training import make_config, make_packed, read_jsonl
from tests.servers.s3_server import moto_s3
from tests.servers.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slow
AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def upload_dir(local: Path, uri: str) -> None:
    for path in sorted(local.rglob("*")):
        if path.is_file():
            storage.write_bytes(path.read_bytes(), storage.join(uri, str(path.relative_to(local))))


def moto_credentials(endpoint: str) -> dict[str, str]:
    """The test credentials of the moto server at ``endpoint``."""
    return {
        "endpoint_url": endpoint,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "region_name": "us-east-1",
    }


def launch_in_job(
    launcher: Any, config_uri: str, run_dir: Path, on_message: Callable[[dict], None]
) -> tuple[Any, Any]:
    """``launcher.launch`` from the op of a one-op job: (the job's result, the launch's)."""
    results = []

    @op
    def launch(context: OpExecutionContext) -> None:
        launched = launcher.launch(
            context, config_path=config_uri, run_dir=str(run_dir), on_message=on_message
        )
        results.append(launched)

    @job
    def one_launch() -> None:
        launch()

    run = one_launch.execute_in_process()
    [result] = results
    return run, result


def test_slurm_job_with_s3_pipes_config_and_packed_tokens(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "node-cache"
    monkeypatch.setenv("PRETRAIN_CACHE_DIR", str(cache))
    run_root = tmp_path / "runs"
    with moto_s3("campaign") as endpoint:
        packed_uri = "s3://campaign/artifacts/packed_tokens"
        upload_dir(make_packed(tmp_path / "packed_tokens", num_train=64), packed_uri)
        config_uri = "s3://campaign/artifacts/runs/b00/run.json"
        config = make_config(Path("unused"), run_root, max_steps=8, every=4)
        config = config.replace(
            data=config.data.__class__(**{**vars(config.data), "packed_dir": packed_uri})
        )
        storage.write_bytes(config.to_json().encode(), config_uri)
        s3 = S3Resource(**moto_credentials(endpoint))
        for name in AWS_VARIABLES:  # only the launcher's S3Resource may reach the job
            monkeypatch.delenv(name)
        launcher = slurm.launcher(pipes_s3_bucket="campaign", pipes_s3_prefix="pipes", s3=s3)
        messages: list[dict[str, Any]] = []
        run, result = launch_in_job(launcher, config_uri, run_root / "b00", messages.append)
        client = boto3.client("s3", **moto_credentials(endpoint))
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="campaign")["Contents"]]
    assert result.ok, result.log_tail
    assert [m["event"] for m in messages] == ["started", "checkpoint", "checkpoint", "finished"]
    assert [m["key"] for m in messages if m["event"] == "checkpoint"] == [
        "b00-s000000004",
        "b00-s000000008",
    ]
    # the messages came back as numbered S3 chunks (PipesS3MessageWriter); the context object
    # under pipes/<run_id>/ was removed when the session closed; no message file on disk
    chunks = [k for k in keys if not k.startswith(("artifacts/", "pipes/"))]
    assert chunks and all(k.split("/")[-1].removesuffix(".json").isdigit() for k in chunks)
    assert not any(k.startswith(f"pipes/{run.run_id}/") for k in keys)
    assert not list((run_root / "b00").glob("*.pipes.jsonl"))
    # the node staged the packed tokens once, committed, and trained from that copy
    [copy] = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert (copy / "_COMMITTED").exists() and (copy / "index.json").exists()
    assert messages[0]["world_size"] == 2


def test_packed_tokens_staged_from_s3_once_and_only_when_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pretrain.errors import DataError
    from pretrain.packing.format import read_packed_index
    from pretrain.packing.staging import stage_packed_dir

    monkeypatch.setenv("PRETRAIN_CACHE_DIR", str(tmp_path / "cache"))
    local = make_packed(tmp_path / "packed_tokens", num_train=16)
    with moto_s3("campaign"):
        upload_dir(local, "s3://campaign/packed")
        staged = Path(stage_packed_dir("s3://campaign/packed"))
        assert stage_packed_dir("s3://campaign/packed") == str(staged)  # cached: no second copy
        for path in local.rglob("*"):
            if path.is_file():
                assert (staged / path.relative_to(local)).read_bytes() == path.read_bytes()
        index = read_packed_index("s3://campaign/packed")
        assert index.root == staged and index.files("train")[0].path.exists()
        upload_dir(local, "s3://campaign/unfinished")
        boto3.client("s3").delete_object(Bucket="campaign", Key="unfinished/_COMMITTED")
        with pytest.raises(DataError, match="no _COMMITTED marker"):
            stage_packed_dir("s3://campaign/unfinished")
    assert stage_packed_dir(str(local)) == str(local)  # a local directory is used in place
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [staged.name]  # no partial copy


def train_run_config(max_steps: int, scratch: Path, resume: str) -> dict[str, Any]:
    config = {
        "run": {"max_steps": max_steps, "resume": resume},
        "optim": {"schedule_steps": 56},  # one LR schedule across both launches
        "checkpoint": {"every_steps": 4, "keep_last": 2, "staging_dir": str(scratch)},
        "data": {"micro_batch_size": 4, "global_batch_sequences": 8},
        "metrics": {"wandb_mode": "disabled"},
    }
    return {"ops": {"train_model": {"config": config}}}


def test_train_job_through_slurm_with_only_an_s3_artifact_root(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # this machine plays Dagster's host and the node. Local: the node's token cache and its
    # checkpoint staging (emptied by each upload), which is also the op's folder for the batch
    # script and the job log; every artifact lives under s3://campaign/artifacts
    scratch, cache = tmp_path / "scratch", tmp_path / "node-cache"
    monkeypatch.setenv("PRETRAIN_CACHE_DIR", str(cache))
    root = "s3://campaign/artifacts"
    with moto_s3("campaign") as endpoint:
        upload = tmp_path / "upload"  # made elsewhere, uploaded, removed
        tokenizer, _ = train_tiny_tokenizer(upload / "tokenizer")
        packed = make_packed(upload / "packed_tokens", num_train=448)
        tokenizer_json = (tokenizer / "tokenizer.json").read_bytes()
        index = json.loads((packed / "index.json").read_text())
        index |= {"tokenizer_sha256": hashlib.sha256(tokenizer_json).hexdigest(), "vocab_size": 300}
        (packed / "index.json").write_text(json.dumps(index))
        upload_dir(upload, root)
        shutil.rmtree(upload)
        identity.adopt(f"{root}/tokenizer", "tokenizer")  # made outside the pipeline: adopted
        store = ArtifactStore(root=root, s3_endpoint_url=endpoint)
        s3 = S3Resource(**moto_credentials(endpoint))
        resources = {
            "store": store,
            "launcher": slurm.launcher(
                pipes_s3_bucket="campaign", pipes_s3_prefix="pipes", pipes_s3_interval_s=0, s3=s3
            ),
        }
        # the op sizes the model from index.json alone: no token shard comes to Dagster's host
        op_config = train_run_config(48, scratch, "none")["ops"]["train_model"]["config"]
        resolved = resolve_train_config(TrainRunConfig(**op_config), store)
        assert (resolved.model.vocab_size, resolved.model.max_seq_len) == (300, 33)
        assert not cache.exists()

        with instance_for_test() as instance:

            def launch(max_steps: int, resume: str) -> tuple[Any, float]:
                """One ``train`` job run to ``max_steps``, checked; (result, seconds)."""
                started = time.monotonic()
                result = train_job.execute_in_process(
                    run_config=train_run_config(max_steps, scratch, resume),
                    resources=resources,
                    instance=instance,
                    raise_on_error=False,
                )
                seconds = time.monotonic() - started
                assert result.success, result.all_events[-1]
                return result, seconds

            first, first_s = launch(48, "none")
            summary = first.output_for_node("train_model")
            keys = [f"b00-s{step:09d}" for step in range(4, 49, 4)]
            assert summary["event"] == "finished" and summary["step"] == 48
            assert summary["checkpoints"] == keys
            assert instance.get_dynamic_partitions("checkpoints") == keys
            # materialized while the job ran: the first partition was logged before the job
            # committed its last checkpoint (Pipes over S3 delivers in ~1-5 s at interval 0)
            materialized = instance.all_logs(
                first.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
            )
            commits = {
                e["step"]: e["time"]
                for e in read_jsonl(scratch / "b00" / "events.jsonl")
                if e["event"] == "checkpoint"
            }
            assert materialized[0].timestamp < commits[48]
            delivered_s = materialized[0].timestamp - commits[4]

            second, second_s = launch(56, "latest")
            resumed = second.output_for_node("train_model")
            assert resumed["step"] == 56
            assert resumed["checkpoints"] == ["b00-s000000052", "b00-s000000056"]
            assert instance.get_materialized_partitions(AssetKey("checkpoints")) == {
                *keys, "b00-s000000052", "b00-s000000056"
            }  # fmt: skip

            started = time.monotonic()
            exported = materialize([hf_export], instance=instance, resources={"store": store},
                                   partition_key="b00-s000000056")  # fmt: skip
            export_s = time.monotonic() - started
            assert exported.success

        runs = f"{root}/runs"
        # checkpoints committed to S3 (keep_last=2 pruned the older ones there)
        assert ckpt.list_checkpoints(runs, "b00") == [
            f"{runs}/b00/step-00000052",
            f"{runs}/b00/step-00000056",
        ]
        # each launch's config is on S3, naming only s3:// artifacts; the batch script hands
        # the job that URI (no local artifact path reaches the node)
        for run in (first, second):
            config_uri = f"{runs}/b00/run-{run.run_id}.json"
            config = json.loads(storage.read_bytes(config_uri))
            assert config["data"]["packed_dir"] == f"{root}/packed_tokens"
            assert config["checkpoint"]["run_root"] == runs
            script = (scratch / "b00" / f"pretrain-{run.run_id[:8]}.sbatch").read_text()
            assert f"--config {config_uri}" in script
        export = json.loads(
            storage.read_bytes(f"{root}/hf_export/b00-s000000056/pretrain_export.json")
        )
        assert export["step"] == 56 and export["source_checkpoint"] == f"{runs}/b00/step-00000056"
        assert storage.is_committed(f"{root}/hf_export/b00-s000000056")

    # the second launch continued from step 48 on S3: every step once, none repeated
    events = read_jsonl(scratch / "b00" / "events.jsonl")
    starts = [e for e in events if e["event"] == "started"]
    assert [e["start_step"] for e in starts] == [0, 48]
    assert starts[1]["resumed_from"] == f"{runs}/b00/step-00000048"
    steps = [r["step"] for r in read_jsonl(scratch / "b00" / "metrics.jsonl") if "loss" in r]
    assert steps == list(range(1, 57))
    # no checkpoint was written locally: no artifact folder, nothing left staged, the resume's
    # verified download of step 48 removed once loaded, no Pipes message file
    local = [p.relative_to(tmp_path) for p in tmp_path.rglob("*")]
    assert [p for p in local if p.suffix == ".distcp" or p.name.startswith("step-")] == []
    assert not list(tmp_path.rglob("*.pipes.jsonl"))
    print(
        f"first launch {first_s:.1f} s, resume {second_s:.1f} s, hf_export {export_s:.1f} s; "
        f"checkpoint event → partition {delivered_s:.1f} s"
    )


def test_nan_rollback_on_slurm_with_only_an_s3_run_root(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recovery loop with nothing shared but S3: the Slurm job mirrors its W&B file, metrics
    and events to the ``s3://`` run root (pretrain.train.mirror); the loss-spike sensor reads
    them there, labels the checkpoints there and rolls back to a healthy one on a new branch —
    the NaN fault of tests/faults/test_fault_injection.py."""
    from dagster import DagsterRunStatus

    from pretrain.recovery.policy import Decision
    from pretrain.recovery.series import metric_rows
    from pretrain.run_files import offline_run_files, wandb_run_id
    from tests.helpers.fault_campaign import POLICY, Campaign, train_config

    # local: the node's staging and token cache, and the op's submit folder (scripts, job logs)
    scratch = tmp_path / "scratch"
    monkeypatch.setenv("PRETRAIN_CACHE_DIR", str(tmp_path / "node-cache"))
    root, runs = "s3://campaign/artifacts", "s3://campaign/artifacts/runs"
    with moto_s3("campaign"), instance_for_test() as instance:
        upload_dir(make_packed(tmp_path / "upload", num_train=1200), f"{root}/packed_tokens")
        shutil.rmtree(tmp_path / "upload")
        campaign = Campaign(
            instance, root, POLICY, slurm=slurm.launcher(), submit_dir=scratch / "submit",
            inject_nan_at_step=25,
        )  # fmt: skip
        assert campaign.run_root == runs
        config = train_config(max_steps=40, checkpoint_every=5, healthy_every=5)
        config["checkpoint"]["staging_dir"] = str(scratch / "staging")
        config["metrics"] = {"mirror_interval_s": 0}  # every step: the sensor reacts quickly
        campaign.launch(config)
        campaign.drive()

        [b00, b01] = campaign.runs()
        assert (b00.status, b01.status) == (DagsterRunStatus.CANCELED, DagsterRunStatus.SUCCESS)
        decision = Decision.from_json(b01.tags["pretrain/decision"])
        assert (decision.kind, decision.spike_step) == ("nonfinite", 25)
        assert decision.checkpoint_key == "b00-s000000015" and decision.skip_window == (25, 26)
        run = b01.run_config["ops"]["train_model"]["config"]["run"]
        assert run["resume"] == f"{runs}/b00/step-00000015" and run["branch"] == "b01"
        assert ckpt.is_healthy(f"{runs}/b00/step-00000015")  # the rollback target, on S3
        # what the sensor read is on S3: the W&B file of each branch, its rows NaN from step 25
        # on b00, and b01 from 16 to 40 with 25 skipped, all finite
        [b00_file] = offline_run_files(runs, wandb_run_id(runs, "b00"))
        assert isinstance(b00_file, str) and b00_file.startswith(f"{runs}/wandb/offline-run-")
        b00_rows = metric_rows(campaign.history("b00")[0])
        assert [r.step for r in b00_rows if not r.finite][0] == 25
        b01_rows = {r.step: r for r in metric_rows(campaign.history("b01")[0])}
        assert sorted(b01_rows) == list(range(16, 41)) and b01_rows[25].skipped
        assert all(r.finite for r in b01_rows.values())
        assert campaign.events("b01")[-1]["event"] == "finished"
        mirrored = storage.read_bytes(f"{runs}/b01/metrics.jsonl").decode().splitlines()
        assert [json.loads(line)["step"] for line in mirrored] == list(range(16, 41))
        assert ckpt.read_meta(ckpt.latest_checkpoint(runs, "b01"))["step"] == 40
    # nothing of the run root is local: the staging folder holds the node's own copies only
    assert not list(scratch.rglob("run-*.json"))


def test_failed_slurm_job_shows_its_log_tail_from_s3(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an s3:// config the job writes its log on the node (``node_log_dir``) and copies it
    next to the config; the op's failure tail is read there (through the launcher's
    S3Resource: the op's environment has no AWS variables), not from the op's folder."""
    node_logs, run_dir = tmp_path / "node-logs", tmp_path / "op"
    node_logs.mkdir()
    runs = "s3://campaign/artifacts/runs"
    with moto_s3("campaign") as endpoint:
        config = make_config(Path("unused"), Path("unused"))
        config = config.replace(
            data=dataclasses.replace(config.data, packed_dir="s3://campaign/artifacts/missing"),
            checkpoint=dataclasses.replace(config.checkpoint, run_root=runs),
        )
        config_uri = f"{runs}/b00/run-failing.json"
        storage.write_bytes(config.to_json().encode(), config_uri)
        s3 = S3Resource(**moto_credentials(endpoint))
        for name in AWS_VARIABLES:
            monkeypatch.delenv(name)
        launcher = slurm.launcher(
            pipes_s3_bucket="campaign", s3=s3, node_log_dir=str(node_logs), log_upload_interval_s=1
        )
        run, result = launch_in_job(launcher, config_uri, run_dir, lambda message: None)
        client = boto3.client("s3", **moto_credentials(endpoint))
        uploaded = client.get_object(
            Bucket="campaign", Key=result.log_path.removeprefix("s3://campaign/")
        )["Body"].read()
    assert not result.ok
    assert result.log_path == f"{runs}/b00/pretrain-{run.run_id[:8]}-{result.job_id}.log"
    # the trainer's error, from the copy on S3; the op's folder holds only the batch script
    assert "packed_tokens" in result.log_tail or "missing" in result.log_tail, result.log_tail
    assert "Error" in result.log_tail
    [node_log] = node_logs.iterdir()
    assert uploaded == node_log.read_bytes()  # the last copy was made after the last line
    assert result.log_tail == uploaded.decode(errors="replace")[-len(result.log_tail) :]
    assert [p.suffix for p in run_dir.iterdir()] == [".sbatch"]
