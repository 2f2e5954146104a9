"""The data stages on a Ray cluster: every step on a warm Ray actor (or, optionally, a Ray job).

Same assets, same partitions, same code as the default (multiprocess) definitions; only the
executor differs. Two executors, one factory per job for each:

- ``*_on_ray`` (the default): ``executors/ray_executor.py``'s ``ray_actor_executor``. Each step is
  a call on the cluster's step pool, which runs it on a long-lived ``StepWorker`` actor that
  already holds Dagster and our definitions (``executors/ray_pool.py``). Chosen because a step here
  computes for 1-4 s and a fresh Ray job per step cost about 6 s more (supervisor actor, a new
  Python importing Dagster, the definitions loaded again: ``bench/ray_step_overhead.py``).
  Needs ``RAY_ADDRESS`` (the cluster's GCS address, ``host:6379``, or ``ray://…``).
- ``*_on_ray_jobs``: dagster-ray's ``ray_executor``, each step a Ray job
  (``dagster api execute_step``) submitted to ``RAY_JOBS_ADDRESS`` (the job API). Kept: it
  needs no driver connection to the cluster, only HTTP.

Either way a step asks for the CPUs and memory of its ``dagster-ray/config`` op tag
(``foundation/step_resources.py``), writes its events to the Dagster instance
(``DAGSTER_HOME``, passed through) and its artifacts under ``PRETRAIN_ROOT`` (a folder every
node sees, or ``s3://…``). A step whose actor or job dies with its node fails its health
check and is retried by the asset's ``RetryPolicy``. Needs the ``ray`` extra
(``pip install -e '.[ray]'``)::

    export RAY_ADDRESS=127.0.0.1:6379 PRETRAIN_ROOT=$PWD/.pretrain/artifacts
    from executors.partition_runs import run_partitions
    run_partitions("app.ray_definitions:filtered_shards_on_ray", ["web-00000", "web-00001"])

The nodes must run the same code and environment (the venv's ``bin`` on their PATH, the
project on their PYTHONPATH, or the same container image on KubeRay): the runtime env holds
only ``env_vars``, so Ray installs nothing per job or actor (no ``pip``/``working_dir``/``uv``).
Worker actors stay up until idle for ``idle_timeout_s`` (60 s), holding their CPUs and memory:
after a code deploy, or before other Ray work that needs those CPUs, wait that long or call
``executors.ray_pool.stop_step_pool(address)``.
"""

from __future__ import annotations

import functools
import json
import os

from dagster import Definitions, JobDefinition

# Variables a step needs on the node; those unset here are not passed.
PASSED_ENV = (
    "DAGSTER_HOME", "PYTHONPATH", "PRETRAIN_ROOT", "PRETRAIN_S3_ENDPOINT_URL",
    "RAY_JOBS_ADDRESS", "POLARS_MAX_THREADS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
)  # fmt: skip
DEFAULT_JOBS_ADDRESS = "http://127.0.0.1:8265"


@functools.cache
def ray_definitions() -> Definitions:
    """The project's Definitions with every job's steps run on the cluster's step pool."""
    from app.definitions import build_definitions
    from executors.ray_executor import ray_actor_executor
    from foundation.step_resources import RAY_CONFIG_TAG, STEP_RESOURCES

    ray = {"address": os.environ.get("RAY_ADDRESS", "auto"), "env_vars": list(PASSED_ENV)}
    # workers sized for the largest data step: one warm worker serves them all
    largest = max(json.loads(tags[RAY_CONFIG_TAG])["memory"] for tags in STEP_RESOURCES.values())
    pool = {"worker_memory_mb": largest >> 20}
    return build_definitions(executor=ray_actor_executor.configured({"ray": ray, "pool": pool}))


@functools.cache
def ray_job_definitions() -> Definitions:
    """The project's Definitions with every step submitted as a Ray job (dagster-ray)."""
    from dagster_ray import ray_executor

    from app.definitions import build_definitions

    address = os.environ.get("RAY_JOBS_ADDRESS", DEFAULT_JOBS_ADDRESS)
    ray = {"address": address, "env_vars": list(PASSED_ENV)}
    return build_definitions(executor=ray_executor.configured({"ray": ray}))


def _job(name: str) -> JobDefinition:
    return ray_definitions().resolve_job_def(name)


def _ray_job(name: str) -> JobDefinition:
    return ray_job_definitions().resolve_job_def(name)


# Module-level zero-argument factories, one per data-stage job and executor
# (``reconstructable`` needs them).
def raw_shards_on_ray() -> JobDefinition:
    return _job("raw_shards_job")


def quality_classifier_on_ray() -> JobDefinition:
    return _job("quality_classifier_job")


def toxicity_classifier_on_ray() -> JobDefinition:
    return _job("toxicity_classifier_job")


def filtered_shards_on_ray() -> JobDefinition:
    return _job("filtered_shards_job")


def minhash_signatures_on_ray() -> JobDefinition:
    return _job("minhash_signatures_job")


def dedup_pairs_on_ray() -> JobDefinition:
    return _job("dedup_pairs_job")


def dedup_clusters_on_ray() -> JobDefinition:
    return _job("dedup_clusters_job")


def deduped_shards_on_ray() -> JobDefinition:
    return _job("deduped_shards_job")


def proxy_runs_on_ray() -> JobDefinition:
    return _job("proxy_runs_job")


def raw_shards_on_ray_jobs() -> JobDefinition:
    return _ray_job("raw_shards_job")


def quality_classifier_on_ray_jobs() -> JobDefinition:
    return _ray_job("quality_classifier_job")


def toxicity_classifier_on_ray_jobs() -> JobDefinition:
    return _ray_job("toxicity_classifier_job")


def filtered_shards_on_ray_jobs() -> JobDefinition:
    return _ray_job("filtered_shards_job")


def minhash_signatures_on_ray_jobs() -> JobDefinition:
    return _ray_job("minhash_signatures_job")


def dedup_pairs_on_ray_jobs() -> JobDefinition:
    return _ray_job("dedup_pairs_job")


def dedup_clusters_on_ray_jobs() -> JobDefinition:
    return _ray_job("dedup_clusters_job")


def deduped_shards_on_ray_jobs() -> JobDefinition:
    return _ray_job("deduped_shards_job")
