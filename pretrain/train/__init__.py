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
| parallel.py     | meta-device build, FSDP2 ``fully_shard`` per block + root, init      |
| optim.py        | AdamW, warmup + cosine LR                                            |
| checkpoint.py   | atomic DCP checkpoints, ``latest_checkpoint``, consolidated loading  |
| metrics.py      | W&B (offline) + ``metrics.jsonl``, MFU                               |
| events.py       | lifecycle events (``events.jsonl`` + an optional external sink)      |
| loop.py         | ``train(cfg, proc, events=..., metrics=...)``                        |

Importing this package does not import torch: ``TrainConfig`` and the checkpoint naming and
listing helpers are available to the Dagster layer without it.
"""

from pretrain.train.checkpoint import (
    checkpoint_key,
    latest_checkpoint,
    list_checkpoints,
    load_consolidated_model,
    read_meta,
)
from pretrain.train.config import (
    CheckpointConfig,
    DataConfig,
    MetricsConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from pretrain.train.events import EventSink, JsonlEventSink

__all__ = [
    "CheckpointConfig",
    "DataConfig",
    "EventSink",
    "JsonlEventSink",
    "MetricsConfig",
    "OptimConfig",
    "RunConfig",
    "TrainConfig",
    "checkpoint_key",
    "latest_checkpoint",
    "list_checkpoints",
    "load_consolidated_model",
    "read_meta",
]
