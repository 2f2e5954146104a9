"""Training on Slurm with nothing shared between Dagster and the nodes but S3 (moto_server).

The op side opens Pipes through dagster-aws (``PipesS3ContextInjector`` +
``PipesS3MessageReader``, S3 settings from ``dagster_aws.s3.S3Resource``); the Slurm job gets
an ``s3://`` run config, ``s3://`` packed tokens and the credentials the launcher passes as
``AWS_*`` variables (the op's own environment has none). The trainer stages the packed tokens
into a node-local cache and reports checkpoints back through S3. Checkpoints themselves stay in
a local run root here: committing them to ``s3://`` is the checkpoint-storage issue's part.

    pytest -q tests/test_slurm_s3.py
"""

from pathlib import Path
from typing import Any

import boto3
import pytest
from dagster import OpExecutionContext, job, op
from dagster_aws.s3 import S3Resource

from pretrain import storage
from tests.helpers.training import make_config, make_packed
from tests.s3_server import moto_s3
from tests.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slow
AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def upload_dir(local: Path, uri: str) -> None:
    for path in sorted(local.rglob("*")):
        if path.is_file():
            storage.write_bytes(path.read_bytes(), storage.join(uri, str(path.relative_to(local))))


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
        s3 = S3Resource(endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing", region_name="us-east-1")  # fmt: skip
        for name in AWS_VARIABLES:  # only the launcher's S3Resource may reach the job
            monkeypatch.delenv(name)
        launcher = slurm.launcher(pipes_s3_bucket="campaign", pipes_s3_prefix="pipes", s3=s3)
        messages: list[dict[str, Any]] = []
        results = []

        @op
        def launch(context: OpExecutionContext) -> None:
            results.append(
                launcher.launch(
                    context,
                    config_path=config_uri,
                    run_dir=str(run_root / "b00"),
                    on_message=messages.append,
                )  # fmt: skip
            )

        @job
        def one_launch() -> None:
            launch()

        run = one_launch.execute_in_process()
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="testing",
            aws_secret_access_key="testing", region_name="us-east-1",
        )  # fmt: skip
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="campaign")["Contents"]]
    [result] = results
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
    from pretrain.train.data import read_packed_index
    from pretrain.train.staging import stage_packed_dir

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
