"""``experiment_sensor``: the data-value engine's workflow, run by the daemon.

The workflow is the library's (:mod:`pretrain.experiments.workflow`): :func:`gather` reads the
artifact root, the pure :func:`next_steps` says what to run next (pools, start proxies, the arms
of each pending admission, its decision, a review, a search's candidates, verification and fit),
and this sensor turns the steps into run requests and partitions.

Its work follows what changed, not the size of the campaign. The cursor holds the newest
materialization of each asset the engine watches, and what the last look found (the groups
waiting for pools, the results that counted, the review files seen). A tick whose instance shows
nothing newer reads nothing from the artifact store; a tick after new materializations asks the
instance which partitions they were (one query per asset) and reads only those groups' and
results' files again. Which groups exist and which are decided come from the instance's asset
index, not from thousands of files, read incrementally (:mod:`foundation.instance_index`: the
keys added and the partitions materialized since the last tick). A reset cursor, or other admission settings, means one full
look; at more than ``first_look_groups`` groups it goes in parts, one a tick
(:func:`pretrain.experiments.workflow.plan_look`: at 10,000 groups on S3 a whole look takes two
minutes, and Dagster cancels a tick after 60 s). One bad file never stops it: a file that cannot be read is skipped with a warning in the
tick's log, and what depends on it waits.

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

from foundation.experiment_launches import launched_searches, verification_of
from foundation.experiments import experiment_root
from foundation.instance_index import materialized_partitions
from foundation.partitions import EXPERIMENT_PARTITIONS_NAME, experiment_partitions
from foundation.stages import job_name, run_configs
from jobs.asset_jobs import JOBS
from pretrain.experiments.admission import AdmissionConfig
from pretrain.experiments.corpus import ABLATIONS, ExperimentRoot
from pretrain.experiments.workflow import (
    FIRST_LOOK_GROUPS,
    Step,
    admission_settings,
    gather,
    next_steps,
    plan_look,
)
from resources.storage import ArtifactStore

# the assets whose new materializations can change what the workflow asks for
WATCHED = ("deduped_shards", "experiment_basis", "proxy_pools", "ablation_pools", "proxy_runs",
           "data_admission", "mixture_search")  # fmt: skip
# the jobs it asks for (one per asset a step materializes)
ASKED = ("proxy_pools", "ablation_pools", "proxy_runs", "data_admission", "mixture_search")
FULL_EVERY_S = 600.0  # a look at least this often (a launch record, a review written by hand)


def newest_materializations(instance: DagsterInstance) -> dict[str, int]:
    """The storage id of each watched asset's newest materialization (one query each)."""
    found = {}
    for asset in WATCHED:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(asset)), limit=1
        ).records
        found[asset] = records[0].storage_id if records else 0
    return found


def remade_since(
    instance: DagsterInstance, root: ExperimentRoot, seen: dict[str, int], newest: dict[str, int]
) -> frozenset[str]:
    """The output folders of the watched assets' partitions materialized after ``seen``: only
    the new events are read (one page of records per thousand), whatever the campaign's size."""
    remade: set[str] = set()
    for asset, last in newest.items():
        after = seen.get(asset, 0)
        if last <= after:
            continue
        partitions = _partitions_since(instance, asset, after)
        if asset == "ablation_pools":
            remade.update(root.uri("proxy_pools", ABLATIONS, p.removeprefix("filt-"))
                          for p in partitions)  # fmt: skip
        else:
            remade.update(root.uri(asset, p) for p in partitions)
        remade.add(root.uri(asset))  # an unpartitioned asset (the basis, the search)
    return frozenset(remade)


def _partitions_since(instance: DagsterInstance, asset: str, after: int) -> set[str]:
    found: set[str] = set()
    cursor = None
    while True:
        page = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(asset), after_storage_id=after),
            limit=1000, cursor=cursor, ascending=True,
        )  # fmt: skip
        found.update(r.partition_key for r in page.records if r.partition_key)
        if not page.has_more:
            return found
        cursor = page.cursor


def admission_run_config(config: AdmissionConfig) -> dict:
    """``data_admission``'s run config carrying ``config`` (as the sensor tried the group)."""
    return run_configs(admission_settings(config))[job_name("data_admission")]


def request_of(step: Step) -> RunRequest:
    job = job_name(step.job)  # the library names the asset a step materializes
    config = run_configs(step.settings).get(job) if step.settings else None
    return RunRequest(
        job_name=job, partition_key=step.partition, run_key=step.run_key,
        run_config=config or {},
    )  # fmt: skip


def experiment_sensor_for(
    config: AdmissionConfig, first_look_groups: int = FIRST_LOOK_GROUPS
) -> SensorDefinition:
    """The sensor, trying new groups with ``config`` (a sensor has no run config: the code
    location chooses it, ``build_definitions(admission=...)``; the default is
    ``AdmissionConfig()``). Its ``data_admission`` runs get the same settings. A first look
    at more than ``first_look_groups`` groups reads them in parts, one a tick."""
    settings = repr(config)  # another admission config (a new code location): a full look

    @sensor(
        name="experiment_sensor",
        jobs=[JOBS[asset] for asset in ASKED],
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
    )
    def experiment_sensor(context: SensorEvaluationContext, store: ArtifactStore) -> Any:
        seen = json.loads(context.cursor) if context.cursor else {}
        instance = context.instance
        newest = newest_materializations(instance)
        same = seen.get("settings") == settings and "done" in seen
        if (
            same
            and seen.get("newest") == newest
            and (time.time() - seen.get("looked_at", 0.0) < FULL_EVERY_S)
        ):
            return SkipReason(
                "nothing the engine watches has been materialized since the last look"
            )
        root = experiment_root(instance, store)
        if not root.has_basis():
            cursor = json.dumps(
                {"newest": newest, "settings": settings, "looked_at": time.time(), "done": {}}
            )
            return SensorResult(
                skip_reason="experiment_basis is not materialized: there is no corpus to compare to",
                cursor=cursor,
            )
        first = seen.get("settings") == settings and not same  # a first look in parts, going on
        since, began, last = plan_look(
            seen if first else {}, same=same, groups=root.groups, newest=newest,
            decided=frozenset(materialized_partitions(instance, "data_admission")),
            remade=remade_since(instance, root, seen.get("newest", {}), newest) if same else frozenset(),
            part_size=first_look_groups,
        )  # fmt: skip
        warn = context.log.warning  # a file that cannot be read: skipped, named in the tick's log
        state = gather(
            root, config, warn=warn, searches=launched_searches(store, warn=warn),
            verify=lambda search, record: verification_of(instance, store, search, record),
            since=since,
        )  # fmt: skip
        if last is not None:  # more parts of a first look to read: nothing to ask for yet
            looked = {"after": last, "newest": began, "stale_pools": state.stale_pools}
            return SensorResult(
                skip_reason=f"first look: groups up to {last} of {len(root.groups):,} read",
                cursor=json.dumps({"settings": settings, "first_look": looked}),
            )
        cursor = json.dumps({"newest": began, "settings": settings, "looked_at": time.time(),
                             "stale_pools": state.stale_pools, "done": state.versions,
                             "review_files": state.review_files})  # fmt: skip
        steps = next_steps(state, config)
        if not steps.requests:
            return SensorResult(
                skip_reason="no shard group awaiting a decision, no review, no search to fit",
                cursor=cursor,
            )
        known = set(instance.get_dynamic_partitions(EXPERIMENT_PARTITIONS_NAME))
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
