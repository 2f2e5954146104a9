"""The recovery loop's library side: metric readers, detectors, policy, streaming monitor.

| module | what it holds |
|---|---|
| :mod:`pretrain.control.wandb_file` | reader of W&B offline ``.wandb`` run files (incremental, CRC-checked) |
| :mod:`pretrain.control.series` | :class:`MetricRow` from W&B history; the trainer's W&B run id for a branch |
| :mod:`pretrain.control.detectors` | spike / NaN / grad-norm / plateau / creep detectors (pure) |
| :mod:`pretrain.control.policy` | :class:`Decision` and the rollback / LR / escalation rules (pure) |
| :mod:`pretrain.control.monitor` | the JSON state a sensor keeps between ticks, one pure step per tick |
| :mod:`pretrain.control.checkpoints` | rollback candidates along a branch's lineage; health labels on disk |

The Dagster sensors in ``sensors/`` fetch rows, call :func:`pretrain.control.monitor.observe_spikes`
or :func:`~pretrain.control.monitor.observe_trends`, and turn the decision into run requests.
Never imports dagster.
"""
