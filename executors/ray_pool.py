"""A pool of warm Ray actors that run Dagster steps in-process (used by ``executors/ray_executor.py``).

Two actor classes, both long-lived on the cluster:

- ``StepPool``: one per cluster (named ``pretrain-step-pool``, detached, on the head node,
  0 CPUs). Every run's orchestrator calls ``run(request, args, env)``; the pool leases a worker
  that fits the step (CPUs, memory and runtime env at least the step's), starting one sized to
  the step when none is idle, awaits the step and releases the worker. Idle workers that hold
  resources another step needs are stopped first (least recently used); workers idle longer
  than ``idle_timeout_s`` (60 s) are stopped: they give their reserved CPUs and memory back to
  other Ray work, and a code deploy reaches new workers within that time.
- ``StepWorker``: one step at a time (``max_concurrency=1``), with the step's CPUs and memory
  reserved by Ray for the worker's lifetime. ``execute`` runs the body of Dagster's
  ``dagster api execute_step`` in this process (through ``foundation/dagster_internals.py``, the one
  module that touches Dagster's internals): the second step it runs finds Dagster, our
  definitions and the instance already loaded.

A worker that dies (its node lost, the process killed) makes the pool's ``run`` raise
``RayActorError``; the orchestrator's health check turns that into a step failure, and the
asset's RetryPolicy runs the step again on a new worker. ``ray.cancel`` of a ``run`` call
stops the worker (a running step cannot be interrupted otherwise).

This module imports neither Dagster nor our definitions at import time: the pool actor never
needs them, and a worker imports them with its first step.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any

import ray

POOL_NAME = "pretrain-step-pool"
NAMESPACE = "pretrain"
HEAD_NODE = "node:__internal_head__"  # a resource only the head node has
# a worker start still not placed after this long (a start itself takes 2-4 s on a loaded
# 2-core node) means idle workers hold the resources it needs: released workers then stop
PENDING_EVICT_S = 10.0


@ray.remote
class StepWorker:
    """Runs Dagster steps one at a time in this warm process."""

    def __init__(self) -> None:
        self.steps_run = 0
        self._instances: dict[str, Any] = {}

    def ready(self) -> tuple[str, int]:
        return ray.get_runtime_context().get_node_id(), os.getpid()

    def execute(self, args_json: str, step_env: dict[str, str], worker: dict[str, Any]) -> dict:
        """One step, as ``dagster api execute_step`` would run it; events go to the instance."""
        from dagster import MetadataValue

        from foundation import dagster_internals as internals

        args = internals.step_args_from_json(args_json)
        ref_key = repr(args.instance_ref)  # one instance per DAGSTER_HOME, kept between steps
        if ref_key not in self._instances:
            self._instances[ref_key] = internals.instance_for_step(args)
        instance = self._instances[ref_key]
        run = instance.get_run_by_id(args.run_id)
        if run is None:
            raise RuntimeError(f"run {args.run_id} not found in the worker's Dagster instance")
        self.steps_run += 1
        step_key = args.step_keys_to_execute[0] if args.step_keys_to_execute else None
        about = {**worker, "pid": os.getpid(), "steps_run": self.steps_run}
        internals.report_step_engine_event(
            instance,
            run,
            step_key,
            f"Step {step_key} on Ray actor {worker['name']} (step {self.steps_run} of this actor).",
            {k: MetadataValue.text(str(v)) for k, v in about.items()},
        )
        saved = {name: os.environ.get(name) for name in step_env}
        os.environ.update(step_env)
        try:
            internals.run_step_in_process(args, instance, run)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        return about


@dataclass
class _Worker:
    name: str
    handle: Any
    shape: tuple[float, int, str]  # (CPUs, memory bytes, runtime env digest)
    created: float = field(default_factory=time.monotonic)
    node_id: str | None = None
    busy: bool = True
    last_used: float = field(default_factory=time.monotonic)

    def fits(self, shape: tuple[float, int, str]) -> bool:
        cpus, memory, env = shape
        return self.shape[0] >= cpus and self.shape[1] >= memory and self.shape[2] == env


@ray.remote(num_cpus=0)
class StepPool:
    """Hands steps to warm ``StepWorker`` actors (see module docstring)."""

    def __init__(self, idle_timeout_s: float = 60.0) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.workers: dict[str, _Worker] = {}
        self._names = itertools.count()
        self._changed: asyncio.Condition | None = None
        self._reaper: asyncio.Task | None = None

    async def run(self, request: dict[str, Any], args_json: str, step_env: dict[str, str]) -> dict:
        """Run one step on a leased worker; raises ``RayActorError`` if the worker died."""
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        worker = await self._lease(request)
        about = {"name": worker.name, "node_id": worker.node_id}
        try:
            result = await worker.handle.execute.remote(args_json, step_env, about)
        except ray.exceptions.RayActorError:
            self._drop(worker, node_lost=True)
            raise
        except asyncio.CancelledError:
            self._drop(worker)  # the step may still be running: stop its process
            raise
        except BaseException:
            await self._release(worker)  # the step raised: the worker itself is fine
            raise
        await self._release(worker)
        return result

    async def _lease(self, request: dict[str, Any]) -> _Worker:
        shape = (float(request["num_cpus"]), int(request["memory"]), request["env_digest"])
        changed = self._condition()
        async with changed:
            while True:
                idle = sorted((w for w in self.workers.values() if not w.busy),
                              key=lambda w: w.last_used)  # fmt: skip
                fitting = [w for w in idle if w.fits(shape)]
                if fitting:
                    worker = fitting[-1]  # the most recently used: the warmest
                    worker.busy = True
                    return worker
                if _room_for(shape):
                    break
                if idle:
                    self._drop(idle[0])  # least recently used, of another shape
                    await asyncio.sleep(0.2)  # Ray's resource view catches up
                    continue
                if any(w.fits(shape) for w in self.workers.values()):
                    # all busy, one of them will do: wait for a release, not a new worker
                    try:
                        await asyncio.wait_for(changed.wait(), timeout=1.0)
                    except TimeoutError:
                        pass
                    continue
                break  # nothing will fit: a new worker, queued by Ray until there is room
            worker = self._start(shape, request)
        try:
            worker.node_id, _ = await worker.handle.ready.remote()
        except BaseException:  # never started (its node lost, a bad runtime env): not pooled
            self._drop(worker)
            raise
        return worker

    def _start(self, shape: tuple[float, int, str], request: dict[str, Any]) -> _Worker:
        name = f"step-worker-{next(self._names)}"
        # at least the pool's worker size, so that later, larger steps find it warm
        shape = (shape[0], max(shape[1], int(request.get("worker_memory", 0))), shape[2])
        options: dict[str, Any] = {"num_cpus": shape[0], "max_restarts": 0,
                                   "max_concurrency": 1, "name": name}  # fmt: skip
        if shape[1]:
            options["memory"] = shape[1]
        if request.get("runtime_env"):
            options["runtime_env"] = request["runtime_env"]
        if request.get("num_gpus"):
            options["num_gpus"] = request["num_gpus"]
        if request.get("resources"):
            options["resources"] = request["resources"]
        # @ray.remote makes the class an ActorClass; untyped ray leaves mypy the plain class
        worker = _Worker(name, StepWorker.options(**options).remote(), shape)  # type: ignore[attr-defined]
        self.workers[name] = worker
        return worker

    async def _release(self, worker: _Worker) -> None:
        worker.busy, worker.last_used = False, time.monotonic()
        # a worker start queued for a while means Ray has no room for it: idle workers go first
        now = time.monotonic()
        if any(w.node_id is None and now - w.created > PENDING_EVICT_S
               for w in self.workers.values()):  # fmt: skip
            self._drop(worker)
        changed = self._condition()
        async with changed:
            changed.notify_all()

    def _drop(self, worker: _Worker, node_lost: bool = False) -> None:
        self.workers.pop(worker.name, None)
        ray.kill(worker.handle, no_restart=True)
        if node_lost and worker.node_id and not _node_alive(worker.node_id):
            for other in [w for w in self.workers.values() if w.node_id == worker.node_id]:
                if not other.busy:
                    self.workers.pop(other.name, None)

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(self.idle_timeout_s, 10.0))
            now = time.monotonic()
            for worker in list(self.workers.values()):
                if not worker.busy and now - worker.last_used > self.idle_timeout_s:
                    self._drop(worker)


def _room_for(shape: tuple[float, int, str]) -> bool:
    free = ray.available_resources()
    return free.get("CPU", 0.0) >= shape[0] and free.get("memory", 0.0) >= shape[1]


def _node_alive(node_id: str) -> bool:
    return any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())


def stop_step_pool(address: str) -> bool:
    """Stop the cluster's step pool; its workers die with it and give their CPUs and memory
    back (idle workers hold them up to ``idle_timeout_s``, and Ray jobs or tasks asking for
    them wait). Connects from this process for the call. False when there was no pool."""
    ray.init(address=address, namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
    try:
        pool = ray.get_actor(POOL_NAME, namespace=NAMESPACE)
    except ValueError:
        return False
    else:
        ray.kill(pool, no_restart=True)
        return True
    finally:
        ray.shutdown()


def step_pool(idle_timeout_s: float = 60.0) -> Any:
    """The cluster's pool actor, started on the head node by the first caller."""
    return StepPool.options(  # type: ignore[attr-defined]  # an ActorClass, as StepWorker
        name=POOL_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        resources={HEAD_NODE: 0.001}, max_concurrency=1000,
    ).remote(idle_timeout_s)  # fmt: skip
