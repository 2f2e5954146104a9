"""``quarantine_sensor``: each rollback that skipped data → a ``quarantined_documents`` partition.

Each tick lists the rollbacks ``loss_spike_sensor`` recorded in the tags of the train runs it
stopped (:func:`foundation.decisions.rollback_decisions`), adds a partition for every decision id not
yet known and requests its materialization. The run key is the decision id, so a reset cursor, a
restarted daemon or a duplicate tick never scores a decision twice; durable state is the
partitions themselves and the run storage. A run whose ``pretrain/decision`` tag is not a
decision is skipped with a warning in the tick's log; the others are still quarantined. The asset
scores on CPU and is cheap next to the training run it describes.
"""

from __future__ import annotations

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from foundation.decisions import rollback_decisions
from foundation.partitions import QUARANTINE_PARTITIONS_NAME, quarantine_partitions
from jobs.asset_jobs import JOBS

NAME = "quarantine_sensor"


@sensor(
    name=NAME,
    job=JOBS["quarantined_documents"],
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="A rollback skipped data → score those documents into the quarantine.",
)
def quarantine_sensor(context: SensorEvaluationContext) -> SensorResult:
    known = set(context.instance.get_dynamic_partitions(QUARANTINE_PARTITIONS_NAME))
    decisions = rollback_decisions(context.instance, warn=context.log.warning)
    new = {k: v for k, v in sorted(decisions.items()) if k not in known}
    if not new:
        return SensorResult(skip_reason="no new rollback decision")
    requests = [
        RunRequest(
            run_key=f"quarantine-{key}",
            partition_key=key,
            tags={"pretrain/training_run_id": run.run_id, "pretrain/requested_by": NAME},
        )
        for key, (run, _) in new.items()
    ]
    return SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[quarantine_partitions.build_add_request(sorted(new))],
    )
