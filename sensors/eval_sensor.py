"""``eval_sensor``: every new ``checkpoints[key]`` materialization → an eval run for that key,
unless ``eval_reports[key]`` is already current or the checkpoint was pruned since.

Each tick reads the checkpoint materializations recorded since its cursor (every one of them,
oldest first: several checkpoints committed between two ticks each get their evaluation). A
checkpoint whose report was made by today's code version from this very checkpoint (the data
version Dagster recorded for the report's ``checkpoints`` input, see
:mod:`sensors.data_versions`) is skipped: ``make demo`` evaluates in process, and the daemon's
first tick afterwards must not evaluate the same checkpoints again. The run key carries the
checkpoint's data version, so a key re-made by another run is evaluated again, and a replayed
tick never requests the same evaluation twice. A checkpoint that keep-last-K has deleted
since its commit is not requested (its evaluation could only fail); the tick's log names it.
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
from pretrain import storage
from pretrain.checkpoint.dcp import checkpoint_dir_for_key
from resources.storage import ArtifactStore
from sensors.data_versions import data_version, latest_tags, not_current

CHECKPOINTS, REPORTS = AssetKey("checkpoints"), AssetKey("eval_reports")
BATCH = 500  # checkpoint materializations read per tick


@sensor(
    job=eval_job,
    minimum_interval_seconds=15,
    default_status=DefaultSensorStatus.RUNNING,
)
def eval_sensor(context: SensorEvaluationContext, store: ArtifactStore):
    instance = context.instance
    after = int(context.cursor) if context.cursor else None
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=CHECKPOINTS, after_storage_id=after), limit=BATCH,
        ascending=True,
    ).records  # fmt: skip
    if not records:
        return SkipReason("no new checkpoint materializations")
    reports = latest_tags(instance, REPORTS.to_user_string())
    repository = context.repository_def
    assert repository is not None  # a sensor evaluated in its code location has one
    code_version = repository.asset_graph.get(REPORTS).code_version
    tokenizer = data_version(instance.get_latest_materialization_event(AssetKey("tokenizer")))
    stale, current = not_current(
        records, reports, code_version, "checkpoints", {"tokenizer": tokenizer}
    )
    run_root = store.uri("runs")  # keep-last-K may have pruned a checkpoint since its commit
    gone = [k for k in stale if not storage.is_committed(str(checkpoint_dir_for_key(run_root, k)))]
    requests = [
        RunRequest(run_key=f"eval-{key}" + (f"-{v[:16]}" if v else ""), partition_key=key)
        for key, v in stale.items()
        if key not in gone
    ]
    if current or gone:
        context.log.info(
            f"already evaluated with these checkpoints: {', '.join(current) or 'none'}; "
            f"pruned from {run_root} since, not evaluated: {', '.join(gone) or 'none'}"
        )
    cursor = str(records[-1].storage_id)
    if not requests:
        return SensorResult(
            skip_reason=f"every new checkpoint is evaluated already ({', '.join(current)})"
            + (f" or pruned ({', '.join(gone)})" if gone else ""),
            cursor=cursor,
        )
    return SensorResult(run_requests=requests, cursor=cursor)
