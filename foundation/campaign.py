"""A training campaign as Dagster records it: the chain of ``train`` runs and their decisions.

Every run a recovery sensor requests carries ``pretrain/parent_run_id`` and the decision's
tags (``pretrain/decision``: the :class:`~pretrain.recovery.policy.Decision` as JSON), and a run
a sensor stopped carries the decision that stopped it. So the run storage itself — not a sensor
cursor, which a reset or a new sensor version loses — holds the campaign's history::

    runs = campaign_runs(instance, run)          # oldest first, ending with ``run``
    campaign_decisions(runs)                     # every decision taken, in order
    rollback_spikes(runs)                        # spike steps of past rollbacks: the budget
    loss_curve_md(runs, metrics)                 # the loss curve with the decisions marked

A ``pretrain/decision`` tag that is not a decision (edited by hand, written by another tool) is
skipped with a warning naming the run (``warn``, default: this module's logger), as the
quarantine sensor does: one bad tag never stops the recovery sensor or the loss chart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from dagster import DagsterInstance, DagsterRun

from foundation.decisions import read_decision
from foundation.train_config import Launched, launch_config
from pretrain.charts import png_markdown
from pretrain.errors import DataError
from pretrain.recovery.loss_chart import loss_curve_png
from pretrain.recovery.policy import Decision
from resources.metrics import WandbMetricsReader

PARENT_TAG, DECISION_TAG = "pretrain/parent_run_id", "pretrain/decision"
MAX_CHAIN = 1000


def campaign_runs(instance: DagsterInstance, run: DagsterRun) -> list[DagsterRun]:
    """``run`` and its ancestors through ``pretrain/parent_run_id``, oldest first."""
    chain, seen = [run], {run.run_id}
    while (parent_id := chain[-1].tags.get(PARENT_TAG)) and len(chain) < MAX_CHAIN:
        parent = instance.get_run_by_id(parent_id)
        if parent is None or parent.run_id in seen:
            break
        chain.append(parent)
        seen.add(parent.run_id)
    return chain[::-1]


def campaign_decisions(
    runs: Sequence[DagsterRun], warn: Callable[[str], None] | None = None
) -> list[Decision]:
    """The decisions recorded on the runs, in campaign order, each once (a stopped run and the
    run resumed after it carry the same decision); a tag that is not one is skipped and
    reported through ``warn``."""
    decisions, seen = [], set()
    for run in runs:
        text = run.tags.get(DECISION_TAG)
        if text and text not in seen:
            seen.add(text)
            try:
                decisions.append(read_decision(run))
            except DataError as exc:
                (warn or logging.getLogger(__name__).warning)(str(exc))
    return decisions


def rollback_spikes(
    runs: Sequence[DagsterRun], warn: Callable[[str], None] | None = None
) -> tuple[int, ...]:
    """Spike steps of the campaign's rollbacks: the escalation budget, durable in run tags (a
    tag that is not a decision is skipped and reported through ``warn``)."""
    return tuple(
        d.spike_step
        for d in campaign_decisions(runs, warn)
        if d.action == "rollback" and d.spike_step is not None
    )


def campaign_branches(runs: Sequence[DagsterRun]) -> list[str]:
    """Branches the campaign trained on, in order of first use."""
    branches: list[str] = []
    for run in runs:
        branch = Launched.of(launch_config(run)).branch
        if branch not in branches:
            branches.append(branch)
    return branches


def loss_curve_md(
    runs: Sequence[DagsterRun],
    metrics: WandbMetricsReader,
    warn: Callable[[str], None] | None = None,
    **kwargs: Any,
) -> str:
    """Markdown with the campaign's loss curve PNG inline (every branch's rows from ``metrics``;
    a decision tag that cannot be read is left off the chart and reported through ``warn``)."""
    branches = {b: metrics.rows_since(b, None)[0] for b in campaign_branches(runs)}
    blob = loss_curve_png(branches, campaign_decisions(runs, warn), **kwargs)
    return png_markdown("loss curve with recovery decisions", blob)
