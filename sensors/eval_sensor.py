"""``eval_sensor``: every new ``checkpoints[key]`` materialization → an eval run for that key,
unless ``eval_reports[key]`` is already current.

Each tick reads the checkpoint materializations recorded since its cursor (every one of them,
oldest first: several checkpoints committed between two ticks each get their evaluation). A
checkpoint whose report was made by today's code version from this very checkpoint (the data
version Dagster recorded for the report's ``checkpoints`` input, see
:mod:`sensors.data_versions`) is skipped: ``make demo`` evaluates in process, and the daemon's
first tick afterwards must not evaluate the same checkpoints again. The run key carries the
checkpoint's data version, so a key re-made by another run is evaluated again, and a replayed
tick never requests the same evaluation twice.
"""

from __future__ import annotations

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jobs.asset_jobs import eval_job
from sensors.data_versions import (
    DATA_VERSION_TAG,
    current_inputs,
    data_version,
    event_tags,
    latest_tags,
    partition_input_versions,
    partitions_data_version,
)

CHECKPOINTS, REPORTS = AssetKey("checkpoints"), AssetKey("eval_reports")
BATCH = 500  # checkpoint materializations read per tick


@sensor(
    job=eval_job,
    minimum_interval_seconds=15,
    default_status=DefaultSensorStatus.RUNNING,
)
def eval_sensor(context: SensorEvaluationContext):
    instance = context.instance
    after = int(context.cursor) if context.cursor else None
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=CHECKPOINTS, after_storage_id=after), limit=BATCH,
        ascending=True,
    ).records  # fmt: skip
    if not records:
        return SkipReason("no new checkpoint materializations")
    reports = latest_tags(instance, REPORTS.to_user_string())
    code_version = context.repository_def.asset_graph.get(REPORTS).code_version
    tokenizer = data_version(instance.get_latest_materialization_event(AssetKey("tokenizer")))
    newest = {}  # partition → its newest materialization among these (oldest first)
    for record in records:
        event = record.event_log_entry
        key = event.dagster_event.partition if event.dagster_event else None
        if key:
            newest[key] = event
    requests, current = [], []
    for key, event in newest.items():
        version = (event_tags(event) or {}).get(DATA_VERSION_TAG)
        # a checkpoint materialized before it carried a data version: what Dagster recorded
        ckpt = partition_input_versions(version) or (partitions_data_version([]), "INITIAL")
        inputs = {"checkpoints": ckpt, "tokenizer": tokenizer}
        if current_inputs(reports.get(key), code_version, inputs):
            current.append(key)
            continue
        run_key = f"eval-{key}" + (f"-{version[:16]}" if version else "")
        requests.append(RunRequest(run_key=run_key, partition_key=key))
    if current:
        context.log.info(f"already evaluated with these checkpoints: {', '.join(current)}")
    cursor = str(records[-1].storage_id)
    if not requests:
        return SensorResult(
            skip_reason=f"every new checkpoint is evaluated already ({', '.join(current)})",
            cursor=cursor,
        )
    return SensorResult(run_requests=requests, cursor=cursor)
