"""The data stages on a Ray cluster: every step runs as a Ray job (dagster-ray's executor).

Same assets, same partitions, same code as the default (multiprocess) definitions; only the
executor differs. Each step of a run is submitted to the Ray job API as
``dagster api execute_step``, asks for the CPUs and memory of its ``dagster-ray/config`` op
tag (``pretrain_assets/step_resources.py``), writes its events to the Dagster instance
(``DAGSTER_HOME``, passed through) and its artifacts under ``PRETRAIN_ROOT`` (a folder every
node sees, or ``s3://…``). A step whose Ray job dies with its node fails its health check
and is retried by the asset's ``RetryPolicy``. Needs the ``ray`` extra
(``pip install -e '.[ray]'``)::

    export RAY_JOBS_ADDRESS=http://127.0.0.1:8265 PRETRAIN_ROOT=$PWD/.pretrain/artifacts
    from dagster import DagsterInstance, execute_job, reconstructable
    from jobs.ray_jobs import shard_pipeline_on_ray
    with DagsterInstance.get() as instance:
        execute_job(reconstructable(shard_pipeline_on_ray), instance,
                    tags={"dagster/partition": "web-00000"})

The nodes must run the same code and environment (the venv's ``bin`` on their PATH, the
project on their PYTHONPATH, or the same container image on KubeRay): the runtime env holds
only ``env_vars``, so Ray installs nothing per job (no ``pip``/``working_dir``/``uv``).
"""

from __future__ import annotations

import functools
import os

from dagster import Definitions, JobDefinition

# Variables a step needs on the node; those unset here are not passed.
PASSED_ENV = (
    "DAGSTER_HOME", "PYTHONPATH", "PRETRAIN_ROOT", "PRETRAIN_S3_ENDPOINT_URL",
    "RAY_JOBS_ADDRESS", "POLARS_MAX_THREADS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
)  # fmt: skip
DEFAULT_ADDRESS = "http://127.0.0.1:8265"


@functools.cache
def ray_definitions() -> Definitions:
    """The project's Definitions with every job's steps submitted to the Ray cluster."""
    from dagster_ray import ray_executor

    from pretrain_assets.definitions import build_definitions

    executor = ray_executor.configured(
        {
            "ray": {
                "address": os.environ.get("RAY_JOBS_ADDRESS", DEFAULT_ADDRESS),
                "env_vars": list(PASSED_ENV),
            }
        }
    )
    return build_definitions(executor=executor)


def _job(name: str) -> JobDefinition:
    return ray_definitions().resolve_job_def(name)


# Module-level zero-argument factories, one per data-stage job (``reconstructable`` needs them).
def ingest_on_ray() -> JobDefinition:
    return _job("ingest")


def quality_on_ray() -> JobDefinition:
    return _job("quality")


def shard_pipeline_on_ray() -> JobDefinition:
    return _job("shard_pipeline")


def band_pairs_on_ray() -> JobDefinition:
    return _job("band_pairs")


def dedup_on_ray() -> JobDefinition:
    return _job("dedup")


def apply_dedup_on_ray() -> JobDefinition:
    return _job("apply_dedup")
