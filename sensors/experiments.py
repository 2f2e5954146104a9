"""``experiment_sensor``: new shard groups are tried by proxies, searches are fitted when done.

Each tick, from what the store and the instance hold (no cursor: every request has a run key):

1. **Admission.** A shard group whose deduplicated documents exist, that the experiment basis
   does not hold and that has no decision yet gets its token pool (``make_pools``), then its
   admission experiments (with and without it, ``AdmissionConfig``'s seeds) are registered and
   run (``run_proxies``), then it is decided (``decide_admission``). With an anneal recipe
   the proxies both arms continue (``registry.starts_of``) run first, the arms after them.
2. **Reviews.** An operator review newer than a group's decision re-decides it.
3. **Searches.** A search launched by ``search_mixture`` (or ``pretrain experiments search``)
   whose candidates have all run is fitted (``fit_search``, with the settings it was launched
   with). An anneal search's candidates are asked for here, once the proxies they continue
   have run (``launch_search`` launched those first). With ``SearchConfig.verify`` the
   proposal is trained as a proxy before the fit that decides on it.

Nothing happens until ``experiment_basis`` is materialized: the groups present then are the
corpus, and every later group is new.

One bad file never stops the sensor. Every file it reads goes through
:mod:`pretrain.experiments.records`: a spec, result, review, decision or launch record that is
not one (cut short, edited by hand, a review with an unknown decision or without who, why or
when) is skipped with a warning in the tick's log that names it, and the rest is done as usual.
A group whose ``decision.json`` cannot be read is left alone (neither admitted nor tried again)
until the file is fixed or removed; an invalid review is never applied.
"""

import dataclasses
import hashlib
import json

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from jobs.asset_jobs import (
    data_admission_job,
    mixture_search_job,
    proxy_pools_job,
    proxy_runs_job,
)
from jobs.experiment_launches import launched_searches, not_run, verification_of
from jobs.experiments import corpus_groups, read_basis
from jobs.partitions import EXPERIMENT_PARTITIONS_NAME, experiment_partitions
from jobs.stages import run_configs
from pretrain import identity, storage
from pretrain.errors import DataError
from pretrain.experiments import registry
from pretrain.experiments.admission import AdmissionConfig
from pretrain.experiments.decisions import DECISION_FILE, decision_records, latest_review
from pretrain.experiments.records import Warn
from resources.storage import ArtifactStore


def _version(names: list[str], store: ArtifactStore) -> str:
    """Names the results an admission or a fit would read (a new result: a new run key)."""
    found = [identity.read(registry.result_dir(store.root, n)) for n in names]
    versions = [i.version if i else "none" for i in found]
    return hashlib.sha256(json.dumps(versions).encode()).hexdigest()[:12]


def admission_requests(
    context: SensorEvaluationContext,
    store: ArtifactStore,
    config: AdmissionConfig,
    decisions: dict[str, str],
    warn: Warn,
) -> tuple[list[RunRequest], list[str]]:
    """(run requests, experiment names to add as partitions) for groups awaiting a decision."""
    basis = read_basis(store)
    groups = corpus_groups(context.instance, store)
    admitted = registry.admitted_groups(groups, basis["shard_groups"], decisions)
    requests: list[RunRequest] = []
    partitions: list[str] = []
    # a group with a decision file is decided, also when the file cannot be read (left alone)
    decided = {g for g in groups if storage.exists(store.uri("data_admission", g, DECISION_FILE))}
    pending = [g for g in groups if g not in basis["shard_groups"] and g not in decided]
    for group in [*admitted, *pending]:  # every pool the experiments read, current
        deduped = identity.read(store.uri("deduped_shards", group))
        if not identity.is_current(store.uri("proxy_pools", group)) and deduped is not None:
            requests.append(
                RunRequest(
                    job_name="make_pools",
                    partition_key=group,
                    run_key=f"pools:{group}:{deduped.version}",
                )  # fmt: skip
            )
    if any(r.job_name == "make_pools" for r in requests):
        return requests, partitions  # experiments wait for their pools
    # an anneal recipe's shared start proxies, once a group awaits them
    starts = registry.starts_of(config.recipe, config.seeds) if pending else []
    try:
        for spec in starts:
            registry.register(store.root, spec)
    except DataError as exc:  # a start's spec file that cannot be read: no admission can run
        warn(f"{exc}: the admissions of {pending} wait until it is fixed or removed")
        return requests, partitions
    partitions += [s.name for s in starts]
    waiting = not_run(store, [s.name for s in starts], warn=warn)
    requests += [
        RunRequest(job_name="run_proxies", partition_key=n, run_key=f"proxy:{n}") for n in waiting
    ]
    for group in [] if waiting else pending:  # the arms wait for the proxies they continue
        try:
            names = _register_arms(store, group, config)
        except DataError as exc:  # an arm's spec file that cannot be read: this group waits
            warn(f"{exc}: the admission of {group} waits until it is fixed or removed")
            continue
        partitions += names
        todo = not_run(store, names, warn=warn)
        asked = {r.partition_key for r in requests if r.job_name == "run_proxies"}
        requests += [  # the without arm is shared by every pending group: asked for once
            RunRequest(job_name="run_proxies", partition_key=n, run_key=f"proxy:{n}")
            for n in todo
            if n not in asked
        ]
        if not todo:
            requests.append(
                RunRequest(
                    job_name="decide_admission",
                    partition_key=group,
                    run_key=f"admission:{group}:{_version(names, store)}",
                    run_config=admission_run_config(config),
                )  # fmt: skip
            )
    return requests, partitions


def _register_arms(store: ArtifactStore, group: str, config: AdmissionConfig) -> list[str]:
    """Register the with and without arms of ``group``'s admission; their names."""
    with_, without = registry.admission_specs(
        group, recipe=config.recipe, seeds=config.seeds, probe_share=config.probe_share
    )
    specs = [*with_, *without]
    for spec in specs:
        registry.register(store.root, spec)
    return [s.name for s in specs]


def review_requests(
    store: ArtifactStore,
    config: AdmissionConfig,
    decisions: dict[str, dict],
    warn: Warn,
) -> list[RunRequest]:
    """Re-decide a group whose latest valid operator review is not the one its decision
    applied (an invalid review file is skipped and reported: it never triggers a run)."""
    requests = []
    for group, decided in decisions.items():
        review = latest_review(store.uri("admission_reviews"), group, warn=warn)
        if review is None:
            continue
        applied = decided.get("review")
        if applied is None or applied.get("at") != review["at"]:
            requests.append(
                RunRequest(
                    job_name="decide_admission",
                    partition_key=group,
                    run_key=f"review:{group}:{review['at']}",
                    run_config=admission_run_config(config),
                )  # fmt: skip
            )
    return requests


def search_requests(
    context: SensorEvaluationContext, store: ArtifactStore, warn: Warn
) -> tuple[list[RunRequest], list[str]]:
    """(run requests, partitions to add): run the candidates of an anneal search once the
    proxies they continue have run; once every candidate has, the proposal's verification
    proxies (``SearchConfig.verify``); then fit the search."""
    requests: list[RunRequest] = []
    partitions: list[str] = []
    for config, record in launched_searches(store, warn=warn):
        names = record.get("names") or []
        todo = not_run(store, names, warn=warn)
        if todo and not record.get("candidates_launched", True):
            if not not_run(store, record.get("starts") or [], warn=warn):
                requests += [RunRequest(job_name="run_proxies", partition_key=n,
                                        run_key=f"proxy:{n}") for n in todo]  # fmt: skip
            continue
        if not names or todo:
            continue
        try:
            checks = (
                verification_of(context.instance, store, config, record) if config.verify else []
            )
        except DataError as exc:  # e.g. a candidate's spec that cannot be read: this search waits
            warn(f"{exc}: the fit of {config.search_id()} waits until it is fixed or removed")
            continue
        partitions += checks
        waiting = not_run(store, checks, warn=warn)
        if waiting:
            requests += [RunRequest(job_name="run_proxies", partition_key=n,
                                    run_key=f"proxy:{n}") for n in waiting]  # fmt: skip
            continue
        settings = {"search": record["config"]}
        requests.append(
            RunRequest(
                job_name="fit_search",
                run_key=f"fit:{config.search_id()}:{_version([*names, *checks], store)}",
                run_config=run_configs(settings)["fit_search"],
            )  # fmt: skip
        )
    return requests, partitions


def experiment_sensor_for(config: AdmissionConfig) -> SensorDefinition:
    """The sensor, trying new groups with ``config`` (a sensor has no run config: the code
    location chooses it, ``build_definitions(admission=...)``; the default is
    ``AdmissionConfig()``). Its ``decide_admission`` runs get the same settings."""

    @sensor(
        name="experiment_sensor",
        jobs=[proxy_pools_job, proxy_runs_job, data_admission_job, mixture_search_job],
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
    )
    def experiment_sensor(context: SensorEvaluationContext, store: ArtifactStore):
        if identity.read(store.uri("experiment_basis")) is None:
            return SkipReason(
                "experiment_basis is not materialized: there is no corpus to compare to"
            )
        warn = context.log.warning  # a file that cannot be read: skipped, named in the tick's log
        decisions = decision_records(store.uri("data_admission"), warn=warn)
        requests, partitions = admission_requests(
            context, store, config, {g: r["decision"] for g, r in decisions.items()}, warn
        )
        searches, checks = search_requests(context, store, warn)
        requests += review_requests(store, config, decisions, warn) + searches
        partitions += checks
        if not requests:
            return SkipReason("no shard group awaiting a decision, no review, no search to fit")
        known = set(context.instance.get_dynamic_partitions(EXPERIMENT_PARTITIONS_NAME))
        new = [n for n in dict.fromkeys(partitions) if n not in known]
        return SensorResult(
            run_requests=requests,
            dynamic_partitions_requests=(
                [experiment_partitions.build_add_request(new)] if new else []
            ),
        )

    return experiment_sensor


def admission_run_config(config: AdmissionConfig) -> dict:
    """``decide_admission``'s run config carrying ``config`` (as the sensor tried the group)."""
    settings = dataclasses.asdict(config)  # run_configs passes its tuples as lists
    settings.pop("review", None)  # an operator's review is given at launch, never by the sensor
    return run_configs({"admission": settings})["decide_admission"]


experiment_sensor = experiment_sensor_for(AdmissionConfig())
