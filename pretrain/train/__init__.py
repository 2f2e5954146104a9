"""The trainer: ``python -m pretrain.train`` and ``torchrun ... -m pretrain.train``.

    python -m pretrain.train --recipe debug_tiny --packed artifacts/packed_tokens --out runs --max-steps 40
    torchrun --standalone --nproc_per_node=2 -m pretrain.train --config run.json

(see ``pretrain/train/__main__.py`` for every flag and the environment variables to set).

| module          | concept                                                              |
|-----------------|----------------------------------------------------------------------|
| config.py       | ``TrainConfig`` and its sections; JSON round trip (torch-free)       |
| recipes.py      | named training recipes (``debug_tiny`` ... ``llama_70b``)            |
| data.py         | packed-token reader with a resumable (epoch, position) cursor        |
| process.py      | ``ProcessInfo``, process group, seeding, RNG state, SIGTERM flag     |
| parallel.py     | meta-device build, AC + compile per block, FSDP2 per block + root    |
| optim.py        | AdamW, warmup + cosine or WSD LR                                     |
| step.py         | one optimizer update; cross-entropy + z-loss; data-wait time         |
| export.py       | consolidated single-file export (``python -m pretrain.train.export``) |
| metrics.py      | W&B (offline) + ``metrics.jsonl``, MFU peak table                    |
| events.py       | lifecycle events (``events.jsonl`` + an optional external sink)      |
| mirror.py       | an ``s3://`` run root: metrics/events/W&B files mirrored there       |
| job_log.py      | copy a batch job's log from the node to the run root                 |
| callbacks.py    | metrics/progress/console, skip events, checkpoints, val-loss hook    |
| loop.py         | ``train(cfg, proc, events=..., metrics=..., callbacks=...)``         |

Checkpoints (naming, listing, DCP save/load, health labels) are in :mod:`pretrain.checkpoint`.
Importing this package does not import torch: ``TrainConfig`` is available to the Dagster layer
without it.
"""

from pretrain.train.config import (
    CheckpointConfig,
    ComputeConfig,
    DataConfig,
    MetricsConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from pretrain.train.events import EventSink, JsonlEventSink

__all__ = [
    "CheckpointConfig",
    "ComputeConfig",
    "DataConfig",
    "EventSink",
    "JsonlEventSink",
    "MetricsConfig",
    "OptimConfig",
    "RunConfig",
    "TrainConfig",
]
