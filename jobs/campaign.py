"""A training campaign as Dagster records it: the chain of ``train`` runs and their decisions.

Every run a recovery sensor requests carries ``pretrain/parent_run_id`` and the decision's
tags (``pretrain/decision``: the :class:`~pretrain.recovery.policy.Decision` as JSON), and a run
a sensor stopped carries the decision that stopped it. So the run storage itself — not a sensor
cursor, which a reset or a new sensor version loses — holds the campaign's history::

    runs = campaign_runs(instance, run)          # oldest first, ending with ``run``
    campaign_decisions(runs)                     # every decision taken, in order
    rollback_spikes(runs)                        # spike steps of past rollbacks: the budget
    loss_curve_md(runs, metrics)                 # the loss curve with the decisions marked
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagster import DagsterInstance, DagsterRun

from jobs.train_config import Launched, launch_config
from pretrain.charts import png_markdown
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


def campaign_decisions(runs: Sequence[DagsterRun]) -> list[Decision]:
    """The decisions recorded on the runs, in campaign order, each once (a stopped run and the
    run resumed after it carry the same decision)."""
    decisions, seen = [], set()
    for run in runs:
        text = run.tags.get(DECISION_TAG)
        if text and text not in seen:
            seen.add(text)
            decisions.append(Decision.from_json(text))
    return decisions


def rollback_spikes(runs: Sequence[DagsterRun]) -> tuple[int, ...]:
    """Spike steps of the campaign's rollbacks: the escalation budget, durable in run tags."""
    return tuple(
        d.spike_step
        for d in campaign_decisions(runs)
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


def loss_curve_md(runs: Sequence[DagsterRun], metrics: WandbMetricsReader, **kwargs: Any) -> str:
    """Markdown with the campaign's loss curve PNG inline (every branch's rows from ``metrics``)."""
    branches = {b: metrics.rows_since(b, None)[0] for b in campaign_branches(runs)}
    blob = loss_curve_png(branches, campaign_decisions(runs), **kwargs)
    return png_markdown("loss curve with recovery decisions", blob)
