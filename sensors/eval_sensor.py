"""``eval_sensor``: every new ``checkpoints[key]`` materialization → an eval run for that key.

The run key is the checkpoint key, which already contains the branch id, so a step that
recurs on a resumed branch still gets its own evaluation.
"""

from dagster import (
    AssetKey,
    DefaultSensorStatus,
    EventLogEntry,
    RunRequest,
    SensorEvaluationContext,
    SkipReason,
    asset_sensor,
)

from jobs.asset_jobs import eval_job


@asset_sensor(
    asset_key=AssetKey("checkpoints"),
    job=eval_job,
    minimum_interval_seconds=15,
    default_status=DefaultSensorStatus.RUNNING,
)
def eval_sensor(context: SensorEvaluationContext, asset_event: EventLogEntry):
    partition = asset_event.dagster_event.partition if asset_event.dagster_event else None
    if not partition:
        return SkipReason("checkpoint materialization without a partition key")
    return RunRequest(run_key=f"eval-{partition}", partition_key=partition)
