"""A Dagster executor whose steps run on warm Ray actors (``executors/ray_pool.py``), not Ray jobs.

Why not dagster-ray's ``ray_executor`` as the default: it submits each step as a Ray job
(``dagster api execute_step``), so every step pays a job supervisor actor, ``/bin/sh``, a
fresh Python process importing Dagster, and a fresh load of our definitions — about 6 s on
our 2-core machines for steps that compute for 1-4 s (``bench/ray_step_overhead.py``). Here
the orchestrator (the run's process, a Ray driver) calls ``StepPool.run`` on the cluster; the
pool hands the step to an idle ``StepWorker`` actor that already holds Dagster, our code and
the instance, and that actor runs the same body as ``dagster api execute_step`` in-process.
Dagster's step-delegating executor and the other internals this needs come from
``foundation/dagster_internals.py`` (the one module that imports ``dagster._…``).

What stays as with dagster-ray: the config surface (``ray``: ``address``, ``env_vars``,
``runtime_env``, ``num_cpus``, ``num_gpus``, ``memory``, ``resources``; ``retries``,
``tag_concurrency_limits``), the per-step ``dagster-ray/config`` op tag (a step runs on an
actor with at least its CPUs and memory, reserved by Ray, so it is placed on a node with room),
one Dagster step per asset with its own events written by the worker to the instance, and
retries: a step whose actor died (node lost) fails its health check (every second here) and
the asset's RetryPolicy runs it again. ``terminate_step`` cancels the pool's call, which stops
the worker. ``ray.address`` is the cluster's address for ``ray.init`` (``host:6379``,
``ray://host:10001`` or ``auto``), not the job API's URL::

    executor = ray_actor_executor.configured(
        {"ray": {"address": "head.internal:6379", "env_vars": ["DAGSTER_HOME", "PRETRAIN_ROOT"]},
         "pool": {"idle_timeout_s": 60, "poll_interval_s": 0.1, "worker_memory_mb": 1024}})
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg
from dagster_ray.configs import RayExecutionConfig
from dagster_ray.core.executor import RayExecutorConfig
from dagster_ray.utils import resolve_env_vars_list

from foundation import dagster_internals as internals
from foundation.dagster_internals import (
    CheckStepHealthResult,
    RetryMode,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
)

POOL_CONFIG = {
    "idle_timeout_s": dg.Field(float, default_value=60.0,
                               description="Stop a worker actor idle this long."),
    "poll_interval_s": dg.Field(float, default_value=0.1,
                                description="How often the orchestrator reads step events."),
    "worker_memory_mb": dg.Field(int, default_value=0, description=(
        "A new worker reserves at least this much memory (a step's own request when larger): "
        "sized for the largest step, one warm worker serves every step.")),
}  # fmt: skip
POOL_DEFAULTS = {"idle_timeout_s": 60.0, "poll_interval_s": 0.1, "worker_memory_mb": 0}


@dg.executor(
    name="ray_actors",
    config_schema={
        "ray": RayExecutorConfig.to_config_schema().as_field(),
        "pool": dg.Field(POOL_CONFIG, is_required=False),
        "retries": internals.get_retries_config(),
        "tag_concurrency_limits": internals.get_tag_concurrency_limits_config(),
    },
    requirements=dg.multiple_process_executor_requirements(),
)
def ray_actor_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Each step on a warm actor of the cluster's step pool (see module docstring)."""
    config: Mapping[str, Any] = init_context.executor_config  # validated against config_schema
    ray_cfg = RayExecutorConfig(**config["ray"])
    pool_cfg: dict[str, Any] = {**POOL_DEFAULTS, **config.get("pool", {})}
    handler = ActorStepHandler(
        ray_cfg,
        idle_timeout_s=pool_cfg["idle_timeout_s"],
        worker_memory=pool_cfg["worker_memory_mb"] << 20,
    )
    retries = RetryMode.from_config(config["retries"])
    assert retries is not None  # the schema's retries selector always holds one mode
    return StepDelegatingExecutor(
        handler,
        retries=retries,
        sleep_seconds=pool_cfg["poll_interval_s"],
        check_step_health_interval_seconds=1,  # a ray.wait(timeout=0) per running step
        tag_concurrency_limits=config.get("tag_concurrency_limits"),
        should_verify_step=True,
    )


class ActorStepHandler(StepHandler):
    """Launches a step as ``StepPool.run``; its health is that call's ObjectRef."""

    def __init__(
        self, config: RayExecutorConfig, *, idle_timeout_s: float, worker_memory: int = 0
    ) -> None:
        super().__init__()
        self.config = config
        self.idle_timeout_s = idle_timeout_s
        self.worker_memory = worker_memory
        self._pool: Any = None
        self._calls: dict[str, Any] = {}  # "run:step:attempt" → the pool call's ObjectRef

    @property
    def name(self) -> str:
        return "RayActorStepHandler"

    def launch_step(self, step_handler_context: StepHandlerContext) -> Iterator[dg.DagsterEvent]:
        step_key = _step_key(step_handler_context)
        request = self._request(step_handler_context.step_tags[step_key])
        run = step_handler_context.dagster_run
        yield internals.step_worker_starting(
            step_handler_context,
            step_key,
            message=f'Executing step "{step_key}" on the Ray step pool '
            f"({request['num_cpus']} CPU, {request['memory'] >> 20} MiB).",
            metadata={"num_cpus": request["num_cpus"], "memory": request["memory"]},
        )
        step_env = {"DAGSTER_RUN_JOB_NAME": run.job_name, "DAGSTER_RUN_STEP_KEY": step_key}
        args = internals.step_args_to_json(step_handler_context.execute_step_args)
        call = self._step_pool().run.remote(request, args, step_env)
        self._calls[_attempt(step_handler_context)] = call

    def check_step_health(self, step_handler_context: StepHandlerContext) -> CheckStepHealthResult:
        import ray

        call = self._calls.get(_attempt(step_handler_context))
        if call is None:
            return CheckStepHealthResult.unhealthy(
                reason=f"step {_step_key(step_handler_context)} was not launched by this process"
            )
        done, _ = ray.wait([call], timeout=0)
        if done:
            try:
                ray.get(call)
            except ray.exceptions.RayError as exc:
                return CheckStepHealthResult.unhealthy(reason=f"{type(exc).__name__}: {exc}")
        return CheckStepHealthResult.healthy()

    def terminate_step(self, step_handler_context: StepHandlerContext) -> Iterator[dg.DagsterEvent]:
        import ray

        step_key = _step_key(step_handler_context)
        yield internals.engine_event(
            step_handler_context, step_key, f"Stopping the Ray actor running step {step_key}"
        )
        call = self._calls.get(_attempt(step_handler_context))
        if call is not None:
            ray.cancel(call)

    def _request(self, tags: Mapping[str, str]) -> dict[str, Any]:
        """What the step's worker must have: CPUs, memory, and an exact-match rest."""
        user = RayExecutionConfig.from_tags(tags)
        runtime_env = dict(user.runtime_env or self.config.runtime_env or {})
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}),
                                   **resolve_env_vars_list(self.config.env_vars)}  # fmt: skip
        resources = {**(self.config.resources or {}), **(user.resources or {})}
        num_gpus = self.config.num_gpus or user.num_gpus or 0
        exact = json.dumps([runtime_env, resources, num_gpus], sort_keys=True)
        return {
            "num_gpus": num_gpus,
            "num_cpus": self.config.num_cpus or user.num_cpus or 0,
            "memory": self.config.memory or user.memory or 0,
            "worker_memory": self.worker_memory,
            "runtime_env": runtime_env,
            "resources": resources,
            "env_digest": hashlib.sha256(exact.encode()).hexdigest()[:16],
        }

    def _step_pool(self) -> Any:
        if self._pool is None:
            import ray

            from executors.ray_pool import NAMESPACE, step_pool

            if not ray.is_initialized():
                ray.init(address=self.config.address or "auto", namespace=NAMESPACE,
                         logging_level="ERROR", log_to_driver=False)  # fmt: skip
            self._pool = step_pool(self.idle_timeout_s)
        return self._pool


def _step_key(context: StepHandlerContext) -> str:
    keys = context.execute_step_args.step_keys_to_execute or []
    if len(keys) != 1:
        raise ValueError(f"one step per launch, got {keys}")
    return keys[0]


def _attempt(context: StepHandlerContext) -> str:
    step_key = _step_key(context)
    attempt = internals.step_attempt(context.execute_step_args, step_key)
    return f"{context.execute_step_args.run_id}:{step_key}:{attempt}"
