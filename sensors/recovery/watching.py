"""The frame of the sensors that watch the running ``train`` run's metrics (``loss_spike_sensor``,
``lr_sensor``) and the resume both the LR and the crash sensors request.

:func:`metrics_sensor` turns a decision body into a ``train``-job sensor: each tick it finds the
running run and reads its branch's new metric rows (:func:`watch_train_run`), returning that
function's skip or re-request as is, and otherwise hands the body a :class:`Tick`: the sensor's
context and resources with the :class:`Watched` run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import NamedTuple

from dagster import (
    DagsterRun,
    DefaultSensorStatus,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from jobs.training import train_job
from pretrain.recovery.detectors import DetectorConfig
from pretrain.recovery.policy import Decision, PolicyConfig, RunSettings
from resources.metrics import RecoveryThresholds, WandbMetricsReader
from sensors.recovery.training_runs import (
    Launched,
    Watched,
    resume_request,
    run_settings,
    watch_train_run,
)


class Tick(NamedTuple):
    """One tick of a metrics sensor: its context, its resources and the watched run."""

    context: SensorEvaluationContext
    metrics: WandbMetricsReader
    recovery: RecoveryThresholds
    watched: Watched

    def settings(self) -> tuple[RunSettings, DetectorConfig, PolicyConfig]:
        """What a monitor decides with besides the rows: the run's settings, the thresholds."""
        config = self.watched.config
        return run_settings(config), self.recovery.detector_config(), self.recovery.policy_config()


WatchBody = Callable[[Tick], SensorResult]


def metrics_sensor(
    name: str, *, minimum_interval_seconds: int
) -> Callable[[WatchBody], SensorDefinition]:
    """Decorator: ``body(tick)`` as a running ``train``-job sensor named ``name`` that decides on
    the watched run's new metric rows; the body's docstring is the sensor's description."""

    def wrap(body: WatchBody) -> SensorDefinition:
        @sensor(
            name=name,
            job=train_job,
            minimum_interval_seconds=minimum_interval_seconds,
            default_status=DefaultSensorStatus.RUNNING,
            description=inspect.cleandoc(body.__doc__ or ""),
        )
        def watching(
            context: SensorEvaluationContext,
            metrics: WandbMetricsReader,
            recovery: RecoveryThresholds,
        ) -> SensorResult:
            watched = watch_train_run(context, metrics, name)
            if isinstance(watched, SensorResult):
                return watched
            return body(Tick(context, metrics, recovery, watched))

        return watching

    return wrap


def resume_latest(
    run: DagsterRun,
    decision: Decision,
    config: Launched,
    *,
    run_key: str,
    sensor: str,
    extra_tags: dict[str, str] | None = None,
) -> RunRequest:
    """The request continuing ``run`` on its own branch from the branch's newest checkpoint."""
    return resume_request(
        run=run,
        decision=decision,
        resume="latest",
        branch=config.branch,
        run_key=run_key,
        sensor=sensor,
        extra_tags=extra_tags,
    )
