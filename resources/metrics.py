"""``WandbMetricsReader``: training metric rows written since a cursor, offline or online.

One interface, two real implementations::

    reader = WandbMetricsReader(run_root="/data/artifacts/runs")             # offline files
    reader = WandbMetricsReader(run_root=..., mode="online", entity="lab")   # the W&B API
    rows, cursor = reader.rows_since("b00", cursor=None)     # [MetricRow, ...], JSON-able cursor
    rows, cursor = reader.rows_since("b00", cursor)          # only what arrived since

The branch's W&B run id is the trainer's (``<branch>-<hash of run_root>``,
:func:`pretrain.run_files.wandb_run_id`).

- offline: reads every ``<run_root>/wandb/offline-run-*-<id>/run-<id>.wandb`` (a crash-resumed
  branch has one per start; on an ``s3://`` run root, the copies the trainer mirrors there) with
  :func:`pretrain.recovery.wandb_file.read_history`; the cursor is
  ``{"files": {folder name: byte offset}}``.
- online: ``wandb.Api().run("<entity>/<project>/<id>").scan_history(min_step=...)``; the cursor is
  ``{"step": last step seen}``. wandb is imported lazily. There is no W&B server on the
  development machines, so this path is not covered by tests: it is kept to the two API calls and
  the same row conversion the offline path uses.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from pretrain.errors import ConfigError
from pretrain.recovery.detectors import DetectorConfig
from pretrain.recovery.policy import PolicyConfig
from pretrain.recovery.series import MetricRow, metric_rows
from pretrain.recovery.wandb_file import read_history
from pretrain.run_files import offline_run_files, run_folder, wandb_run_id


class WandbMetricsReader(ConfigurableResource):
    """Where the trainer's W&B runs live and how to read them."""

    run_root: str = Field(
        description=(
            "The trainer's checkpoint.run_root, e.g. <artifacts>/runs: a local path, or s3:// "
            "(the trainer mirrors its W&B files there)"
        )
    )
    mode: str = Field(default="offline", description="'offline' (run files) or 'online' (W&B API).")
    wandb_dir: str | None = Field(
        default=None, description="Folder holding wandb/offline-run-*; default: run_root."
    )
    entity: str | None = Field(default=None, description="W&B entity (online mode).")
    project: str = Field(default="pretrain", description="W&B project (online mode).")

    def run_id(self, branch: str) -> str:
        return wandb_run_id(self.run_root, branch)

    def rows_since(
        self, branch: str, cursor: dict[str, Any] | None
    ) -> tuple[list[MetricRow], dict[str, Any]]:
        """Metric rows of ``branch`` logged after ``cursor`` (None: from the start), new cursor."""
        if self.mode == "offline":
            return self._offline_rows(branch, cursor or {"files": {}})
        if self.mode == "online":
            return self._online_rows(branch, cursor or {"step": -1})
        raise ConfigError(f"WandbMetricsReader.mode={self.mode!r}; use 'offline' or 'online'")

    def _offline_rows(
        self, branch: str, cursor: dict[str, Any]
    ) -> tuple[list[MetricRow], dict[str, Any]]:
        offsets = dict(cursor.get("files", {}))
        history: list[dict[str, Any]] = []
        for path in offline_run_files(self.wandb_dir or self.run_root, self.run_id(branch)):
            folder = run_folder(path)
            rows, offsets[folder] = read_history(path, offsets.get(folder, 0))
            history.extend(rows)
        return metric_rows(history), {"files": offsets}

    def _online_rows(
        self, branch: str, cursor: dict[str, Any]
    ) -> tuple[list[MetricRow], dict[str, Any]]:
        import wandb  # lazy: the Dagster daemon imports this module often

        path = "/".join(p for p in (self.entity, self.project, self.run_id(branch)) if p)
        last_step = int(cursor["step"])
        history = wandb.Api().run(path).scan_history(min_step=last_step + 1)
        rows = metric_rows(history)
        return rows, {"step": rows[-1].step if rows else last_step}


class RecoveryThresholds(ConfigurableResource):
    """Operator-tunable thresholds of the recovery loop (see the README runbook).

    ``detector`` / ``policy`` override fields of :class:`pretrain.recovery.detectors.DetectorConfig`
    and :class:`pretrain.recovery.policy.PolicyConfig` (e.g. ``{"spike_fraction": 0.3}``);
    ``max_auto_resumes``: crash-resumes in a row without a new checkpoint before giving up."""

    detector: dict[str, float] = Field(default_factory=dict)
    policy: dict[str, float] = Field(default_factory=dict)
    max_auto_resumes: int = 3

    def detector_config(self) -> DetectorConfig:
        return _build(DetectorConfig, self.detector, "detector")

    def policy_config(self) -> PolicyConfig:
        return _build(PolicyConfig, self.policy, "policy")


def _build(cls: type, overrides: dict[str, float], where: str) -> Any:
    known = {f.name: f.type for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ConfigError(
            f"RecoveryThresholds.{where} has unknown keys {unknown}; known: {sorted(known)}"
        )
    typed = {k: int(v) if known[k] == "int" else float(v) for k, v in overrides.items()}
    return cls(**typed)
