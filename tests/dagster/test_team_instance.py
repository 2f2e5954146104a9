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


def _readme_team_yaml() -> dict:
    """The yaml block under the README's "A team `dagster.yaml`" heading."""
    import yaml

    from tests.helpers.readme import README

    text = README.read_text().split("### A team `dagster.yaml`", 1)[1]
    return yaml.safe_load(text.split("```yaml", 1)[1].split("```", 1)[0])


def test_the_readme_queue_and_retention_settings_load(tmp_path: Path) -> None:
    """Every setting of the README's team file but the servers (Postgres, S3) is one Dagster
    accepts: the run queue's limits, tick retention, pools, run monitoring, sensor threads."""
    import yaml

    config = {k: v for k, v in _readme_team_yaml().items() if k not in ("storage", "compute_logs")}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None and queue.max_concurrent_runs == 64
        [limit] = queue.tag_concurrency_limits
        assert limit["key"] == "dagster/backfill" and limit["limit"] == 16
        assert instance.get_settings("retention")["sensor"]["purge_after_days"]["skipped"] == 1
