"""The project's definitions with every step run on a Ray cluster: dagster-ray's ``ray_executor``.

The same assets, jobs, sensors, schedules and resources as ``app.definitions.build_definitions()``
(per-shard backfills batched ``PRETRAIN_PARTITIONS_PER_RUN`` shard groups a run, default 16);
only the executor differs, for every job (``train`` and ``launch_search`` too: their steps
launch and watch, the training itself goes through its launcher). Each step of a run is submitted as a Ray job (``dagster api
execute_step``) through the cluster's job API, asking for the CPUs and memory of the step's
``dagster-ray/config`` op tag (``foundation/step_resources.py``), so Ray places it on a node
with room. The step writes its events to the Dagster instance and its artifacts under
``PRETRAIN_ROOT``; a step whose Ray job fails (its node lost) fails dagster-ray's health check
and the asset's ``RetryPolicy`` runs it again; bad input fails once, with its reason. Load it
as a code location (``dagster dev -m app.ray_definitions``, or a ``python_module`` entry of a
workspace) and launch runs and backfills from the UI, ``dagster asset materialize`` or a
sensor as usual. Needs the ``ray`` extra (``pip install -e '.[ray]'``).

Environment, where runs are launched (the run worker is the Ray jobs' client):

- ``RAY_ADDRESS``: the cluster, read by Ray's ``JobSubmissionClient`` when a run starts: the
  job API's URL (``http://head:8265``) or the GCS address (``head:6379``, from which Ray looks
  the job API up). Ray reads ``RAY_API_SERVER_ADDRESS`` first when it is set. Unset, Ray looks
  for a cluster started on this machine.
- passed on to every step by name (:data:`PASSED_ENV`, those set when the step is launched):
  ``DAGSTER_HOME`` (the instance every node writes to: Postgres for several machines),
  ``PYTHONPATH``, ``PRETRAIN_ROOT`` (a folder every node sees, or ``s3://…``), the other
  ``PRETRAIN_*`` settings the definitions read (``PRETRAIN_S3_ENDPOINT_URL``,
  ``PRETRAIN_LAUNCHER``, ...), ``POLARS_MAX_THREADS`` and the AWS credentials.

The nodes run the same code and environment (the venv's ``bin`` first on their PATH, the
project importable, or the same image on KubeRay): the runtime env holds only ``env_vars``, so
Ray installs nothing per job (no ``pip``/``working_dir``/``uv``)::

    ray start --head --num-cpus=16 --dashboard-host=0.0.0.0   # then on each worker node:
    ray start --address=head:6379 --num-cpus=16
    export RAY_ADDRESS=http://head:8265 PRETRAIN_ROOT=s3://campaign/artifacts
    dagster dev -m app.ray_definitions

Module-level zero-argument job factories (``<asset>_on_ray``) exist for ``execute_job(
reconstructable(...))``, which tests and benchmarks use; each returns the ``<asset>_job`` of
these definitions.
"""

from __future__ import annotations

import functools

from dagster import Definitions, JobDefinition

from app.definitions import build_definitions
from foundation.stages import job_name

try:
    from dagster_ray import ray_executor
except ModuleNotFoundError as missing:  # dagster-ray and ray come together, in the ray extra
    raise ModuleNotFoundError(
        "app.ray_definitions needs the ray extra: pip install -e '.[ray]'", name="ray"
    ) from missing

# Variables a step needs on its node; those unset when a step is launched are not passed.
# The step's process builds the definitions again: every PRETRAIN_* setting they read.
PASSED_ENV = (
    "DAGSTER_HOME", "PYTHONPATH", "POLARS_MAX_THREADS",
    "PRETRAIN_ROOT", "PRETRAIN_S3_ENDPOINT_URL", "PRETRAIN_PARTITIONS_PER_RUN",
    "PRETRAIN_LAUNCHER", "PRETRAIN_LAUNCHER_CONFIG", "PRETRAIN_SOURCE_URI", "PRETRAIN_SOURCE_NAME",
    "PRETRAIN_WANDB_MODE", "PRETRAIN_EVAL_DIR", "PRETRAIN_CACHE_DIR",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
)  # fmt: skip


@functools.cache
def ray_definitions() -> Definitions:
    """The project's Definitions with every job's steps submitted as Ray jobs (dagster-ray).

    The cluster's address is not part of the config: Ray reads ``RAY_ADDRESS`` when a run
    starts (see the module docstring), so definitions built once serve any cluster."""
    executor = ray_executor.configured({"ray": {"env_vars": list(PASSED_ENV)}})
    return build_definitions(executor=executor)


def _job(asset: str) -> JobDefinition:
    return ray_definitions().resolve_job_def(job_name(asset))


# ``reconstructable`` needs module-level zero-argument factories: one for each job a test or a
# benchmark runs with execute_job
def raw_shards_on_ray() -> JobDefinition:
    return _job("raw_shards")


def quality_classifier_on_ray() -> JobDefinition:
    return _job("quality_classifier")


def toxicity_classifier_on_ray() -> JobDefinition:
    return _job("toxicity_classifier")


def filtered_shards_on_ray() -> JobDefinition:
    return _job("filtered_shards")


def minhash_signatures_on_ray() -> JobDefinition:
    return _job("minhash_signatures")


def proxy_runs_on_ray() -> JobDefinition:
    return _job("proxy_runs")


defs = ray_definitions()
