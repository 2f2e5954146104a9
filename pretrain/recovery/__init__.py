"""The recovery loop's library side: metric readers, detectors, policy, streaming monitor.

| module | what it holds |
|---|---|
| :mod:`pretrain.recovery.wandb_file` | reader of W&B offline ``.wandb`` run files (incremental, CRC-checked) |
| :mod:`pretrain.recovery.series` | :class:`MetricRow` from W&B history; the trainer's W&B run id for a branch |
| :mod:`pretrain.recovery.detectors` | spike / NaN / grad-norm / plateau / creep detectors (pure) |
| :mod:`pretrain.recovery.policy` | :class:`Decision` and the rollback / LR / escalation rules (pure) |
| :mod:`pretrain.recovery.monitor` | the JSON state a sensor keeps between ticks, one pure step per tick |
| :mod:`pretrain.recovery.evaluations` | which checkpoints are evaluated next: none a rollback abandoned, N per branch |
| :mod:`pretrain.checkpoint.health` | rollback candidates along a branch's lineage; health labels on disk |

The Dagster sensors in ``sensors/`` fetch rows, call :func:`pretrain.recovery.monitor.observe_spikes`
or :func:`~pretrain.recovery.monitor.observe_trends`, and turn the decision into run requests.
Never imports dagster.
"""
