"""``eval_sensor``: every new ``checkpoints[key]`` materialization → an eval run for that key,
unless ``eval_reports[key]`` is already current, the checkpoint was pruned since, or a rollback
abandoned it — and never more than ``PolicyConfig.evaluations_per_branch`` at a time per branch.

Each tick reads the checkpoint materializations recorded since its cursor (every one of them,
oldest first) into a queue kept in the cursor (:class:`pretrain.recovery.evaluations.EvalQueue`)
and asks :func:`pretrain.recovery.evaluations.plan_evaluations` what to request now:

- a checkpoint whose report was made by today's code version from this very checkpoint (the
  data version Dagster recorded for the report's ``checkpoints`` input, see
  :mod:`foundation.data_versions`) is dropped: ``make demo`` evaluates in process, and the daemon's
  first tick afterwards must not evaluate the same checkpoints again;
- one that keep-last-K has deleted since its commit is dropped (its evaluation could only
  fail); the tick's log names it;
- one of a branch a rollback left behind (a step after the rollback target) is dropped, with an
  observation on its partition that says why; a queued or running evaluation of one is
  cancelled, with the reason in its tags (:mod:`sensors.recovery.abandoned`);
- of the rest, each branch gets at most ``evaluations_per_branch`` (default 1) evaluations
  queued or running, its oldest checkpoints first; the others wait in the queue. A burst of
  checkpoints then never queues a burst of runs ahead of training.

The run key carries the checkpoint's data version, so a key re-made by another run is evaluated
again, and a replayed tick never requests the same evaluation twice. A reset cursor reads every
checkpoint again and drops those already evaluated.
"""

from __future__ import annotations

from collections import Counter

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from foundation.data_versions import data_version, latest_tags, newest_versions, not_current
from jobs.asset_jobs import JOBS
from pretrain import storage
from pretrain.checkpoint.dcp import checkpoint_dir_for_key, parse_checkpoint_key
from pretrain.recovery.evaluations import EvalQueue, plan_evaluations
from resources.metrics import RecoveryThresholds
from resources.storage import ArtifactStore
from sensors.recovery.abandoned import (
    CANCELLED_TAG,
    PARTITION_TAG,
    abandonment_observations,
    active_evaluations,
    cancel_abandoned_evaluations,
    rollbacks,
)

CHECKPOINTS, REPORTS = AssetKey("checkpoints"), AssetKey("eval_reports")
BATCH = 500  # checkpoint materializations read per tick


@sensor(
    job=JOBS["eval_reports"],
    minimum_interval_seconds=15,
    default_status=DefaultSensorStatus.RUNNING,
)
def eval_sensor(
    context: SensorEvaluationContext, store: ArtifactStore, recovery: RecoveryThresholds
) -> SensorResult:
    instance = context.instance
    queue = EvalQueue.from_json(context.cursor)
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=CHECKPOINTS, after_storage_id=queue.after), limit=BATCH,
        ascending=True,
    ).records  # fmt: skip
    after = records[-1].storage_id if records else None
    queue = queue.add(newest_versions(records).items(), after=after)
    decisions = rollbacks(instance, warn=context.log.warning)
    active = active_evaluations(instance)
    cancelled = cancel_abandoned_evaluations(instance, active, decisions)
    if not queue.pending:
        return SensorResult(
            skip_reason="no new checkpoint to evaluate",
            cursor=queue.to_json(),
            asset_events=abandonment_observations(cancelled),
        )
    pending = dict(queue.pending)
    stale, current = not_current(
        pending,
        latest_tags(instance, REPORTS.to_user_string(), partitions=list(pending)),
        _code_version(context),
        "checkpoints",
        {
            "tokenizer": data_version(
                instance.get_latest_materialization_event(AssetKey("tokenizer"))
            )
        },
    )
    run_root = store.uri("runs")  # keep-last-K may have pruned a checkpoint since its commit
    gone = [k for k in stale if not storage.is_committed(str(checkpoint_dir_for_key(run_root, k)))]
    in_flight = Counter(  # a cancelled evaluation no longer holds its branch's slot
        parse_checkpoint_key(run.tags[PARTITION_TAG])[0]
        for run in active
        if run.tags.get(PARTITION_TAG)
        and run.tags[PARTITION_TAG] not in cancelled
        and CANCELLED_TAG not in run.tags
    )
    plan = plan_evaluations(
        [(k, v) for k, v in stale.items() if k not in gone],
        in_flight=in_flight,
        rollbacks=decisions,
        limit=recovery.policy_config().evaluations_per_branch,
    )
    if current or gone:
        context.log.info(
            f"already evaluated with these checkpoints: {_few(current)}; "
            f"pruned from {run_root} since, not evaluated: {_few(gone)}"
        )
    requests = [
        RunRequest(run_key=f"eval-{key}" + (f"-{v[:16]}" if v else ""), partition_key=key)
        for key, v in plan.requests
    ]
    observations = abandonment_observations({**cancelled, **plan.abandoned})
    cursor = EvalQueue(after=queue.after, pending=plan.waiting).to_json()
    if requests:
        return SensorResult(run_requests=requests, cursor=cursor, asset_events=observations)
    return SensorResult(
        skip_reason=_skip_reason(current, gone, plan.abandoned, len(plan.waiting)),
        cursor=cursor,
        asset_events=observations,
    )


def _few(keys: list[str], shown: int = 10) -> str:
    """Keys for a log line: the first few and how many (a reset cursor reads thousands)."""
    if not keys:
        return "none"
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


def _code_version(context: SensorEvaluationContext) -> str | None:
    repository = context.repository_def
    assert repository is not None  # a sensor evaluated in its code location has one
    return repository.asset_graph.get(REPORTS).code_version


def _skip_reason(current: list[str], gone: list[str], abandoned: dict, waiting: int) -> str:
    done = []
    if current:
        done.append(f"evaluated already ({_few(current)})")
    if gone:
        done.append(f"pruned ({_few(gone)})")
    if abandoned:
        done.append(f"abandoned by a rollback ({', '.join(sorted(abandoned))})")
    text = "every new checkpoint is " + " or ".join(done) if done else ""
    if waiting:
        held = f"{waiting} checkpoint(s) wait for their branch's evaluation in flight"
        text = f"{text}; {held}" if text else held
    return text or "nothing to evaluate"
