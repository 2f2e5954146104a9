"""``experiment_sensor``: the data-value engine's workflow, run by the daemon.

The workflow is the library's (:mod:`pretrain.experiments.workflow`): :func:`gather` reads the
artifact root, the pure :func:`next_steps` says what to run next (pools, start proxies, the arms
of each pending admission, its decision, a review, a search's candidates, verification and fit),
and this sensor turns the steps into run requests and partitions. It keeps one cursor: the
newest materializations of the engine's assets it has acted on. A tick whose instance shows
none newer (and that is within ``FULL_EVERY_S`` of the last full look) reads nothing from the
artifact store: a campaign of thousands of shard groups does not pay thousands of reads every
30 seconds for nothing. A cursor reset only costs a full look. One bad file never stops it: a
file that cannot be read is skipped with a warning in the tick's log, and what depends on it
waits.

Nothing happens until ``experiment_basis`` is materialized: the groups present then are the
corpus, and every later group is new.
"""

from __future__ import annotations

import json
import time
from typing import Any

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jobs.asset_jobs import (
    ablation_pools_job,
    data_admission_job,
    mixture_search_job,
    proxy_pools_job,
    proxy_runs_job,
)
from jobs.experiment_launches import launched_searches, verification_of
from jobs.experiments import experiment_root
from jobs.partitions import EXPERIMENT_PARTITIONS_NAME, experiment_partitions
from jobs.stages import run_configs
from pretrain.experiments.admission import AdmissionConfig
from pretrain.experiments.workflow import Step, admission_settings, gather, next_steps
from resources.storage import ArtifactStore

# the assets whose new materializations can change what the workflow asks for
WATCHED = ("deduped_shards", "experiment_basis", "proxy_pools", "ablation_pools", "proxy_runs",
           "data_admission", "mixture_search")  # fmt: skip
FULL_EVERY_S = 600.0  # a full look at least this often (a launch record, a file fixed by hand)


def newest_materializations(instance: DagsterInstance) -> dict[str, int]:
    """The storage id of each watched asset's newest materialization (one query each)."""
    found = {}
    for asset in WATCHED:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(asset)), limit=1
        ).records
        found[asset] = records[0].storage_id if records else 0
    return found


def admission_run_config(config: AdmissionConfig) -> dict:
    """``decide_admission``'s run config carrying ``config`` (as the sensor tried the group)."""
    return run_configs(admission_settings(config))["decide_admission"]


def request_of(step: Step) -> RunRequest:
    config = run_configs(step.settings).get(step.job) if step.settings else None
    return RunRequest(
        job_name=step.job, partition_key=step.partition, run_key=step.run_key,
        run_config=config or {},
    )  # fmt: skip


def experiment_sensor_for(config: AdmissionConfig) -> SensorDefinition:
    """The sensor, trying new groups with ``config`` (a sensor has no run config: the code
    location chooses it, ``build_definitions(admission=...)``; the default is
    ``AdmissionConfig()``). Its ``decide_admission`` runs get the same settings."""
    settings = repr(config)  # another admission config (a new code location): a full look

    @sensor(
        name="experiment_sensor",
        jobs=[
            proxy_pools_job,
            ablation_pools_job,
            proxy_runs_job,
            data_admission_job,
            mixture_search_job,
        ],  # fmt: skip
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
    )
    def experiment_sensor(context: SensorEvaluationContext, store: ArtifactStore) -> Any:
        seen = json.loads(context.cursor) if context.cursor else {}
        newest = newest_materializations(context.instance)
        quiet = seen.get("newest") == newest and seen.get("settings") == settings
        if quiet and time.time() - seen.get("looked_at", 0.0) < FULL_EVERY_S:
            return SkipReason(
                "nothing the engine watches has been materialized since the last look"
            )
        cursor = json.dumps({"newest": newest, "settings": settings, "looked_at": time.time()})
        root = experiment_root(context.instance, store)
        if not root.has_basis():
            return SensorResult(
                skip_reason="experiment_basis is not materialized: there is no corpus to compare to",
                cursor=cursor,
            )
        warn = context.log.warning  # a file that cannot be read: skipped, named in the tick's log
        state = gather(
            root, config, warn=warn, searches=launched_searches(store, warn=warn),
            verify=lambda search, record: verification_of(context.instance, store, search, record),
        )  # fmt: skip
        steps = next_steps(state, config)
        if not steps.requests:
            return SensorResult(
                skip_reason="no shard group awaiting a decision, no review, no search to fit",
                cursor=cursor,
            )
        known = set(context.instance.get_dynamic_partitions(EXPERIMENT_PARTITIONS_NAME))
        new = [n for n in steps.partitions if n not in known]
        return SensorResult(
            run_requests=[request_of(step) for step in steps.requests],
            dynamic_partitions_requests=(
                [experiment_partitions.build_add_request(new)] if new else []
            ),
            cursor=cursor,
        )

    return experiment_sensor


experiment_sensor = experiment_sensor_for(AdmissionConfig())
