"""Checkpoints: one ``step-<N>`` directory per save, never half-visible.

| module          | concept                                                                |
|-----------------|------------------------------------------------------------------------|
| dcp.py          | naming, listing, resume resolution, pruning, loading (torch-free names) |
| checkpointer.py | collective DCP save, sync or async, atomic commit, healthy-by-schedule  |
| health.py       | rollback candidates along a branch's lineage; health labels on disk     |

    from pretrain.checkpoint import latest_checkpoint, checkpoint_key
    latest_checkpoint(".pretrain/artifacts/runs", "b00")   # newest committed step dir
"""

from pretrain.checkpoint.dcp import (
    checkpoint_key,
    is_healthy,
    latest_checkpoint,
    latest_healthy_checkpoint,
    list_checkpoints,
    load_consolidated_model,
    mark_healthy,
    read_meta,
)

__all__ = [
    "checkpoint_key",
    "is_healthy",
    "latest_checkpoint",
    "latest_healthy_checkpoint",
    "list_checkpoints",
    "load_consolidated_model",
    "mark_healthy",
    "read_meta",
]
