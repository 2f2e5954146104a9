"""The README's team ``dagster.yaml``: step logs go to S3 through dagster-aws's
``S3ComputeLogManager`` (here against ``moto_server``; instance storage stays SQLite — the
Postgres half is tests/dagster/test_postgres_instance.py).

    pytest -q tests/dagster/test_team_instance.py
"""

from pathlib import Path

import boto3
from dagster import DagsterInstance, job, op
from dagster_aws.s3.compute_log_manager import S3ComputeLogManager

from tests.servers.s3_server import moto_s3


@op
def say_hello() -> None:
    print("hello from a step whose log goes to S3")


@job
def hello() -> None:
    say_hello()


def test_step_logs_land_in_s3(tmp_path: Path) -> None:
    with moto_s3("campaign") as endpoint:
        (tmp_path / "dagster.yaml").write_text(
            "compute_logs:\n"
            "  module: dagster_aws.s3.compute_log_manager\n"
            "  class: S3ComputeLogManager\n"
            "  config:\n"
            "    bucket: campaign\n"
            "    prefix: dagster/compute-logs\n"
            "    region: us-east-1\n"
            f"    endpoint_url: {endpoint}\n"
            "telemetry:\n  enabled: false\n"
        )
        with DagsterInstance.from_config(str(tmp_path)) as instance:
            assert isinstance(instance.compute_log_manager, S3ComputeLogManager)
            result = hello.execute_in_process(instance=instance)
            assert result.success
        objects = boto3.client("s3", endpoint_url=endpoint).list_objects_v2(
            Bucket="campaign", Prefix="dagster/compute-logs/"
        )
        keys = [o["Key"] for o in objects.get("Contents", [])]
        bodies = [
            boto3.client("s3", endpoint_url=endpoint)
            .get_object(Bucket="campaign", Key=k)["Body"]
            .read()
            .decode()
            for k in keys
        ]
    assert keys, "no compute log was uploaded"
    assert any("hello from a step whose log goes to S3" in body for body in bodies)
