"""Parallelism: build the model on the meta device, shard it with FSDP2, materialize it.

    model = build_model(model_cfg, proc, seed=0, compute=ComputeConfig(activation_checkpointing=True))

With ``world_size > 1``: every transformer block gets its own ``fully_shard`` (so only one
block's full parameters live in memory at a time), then the root (embeddings, final norm and
output head); parameters are sharded along dim 0 over all ranks. On CUDA the FSDP2
``MixedPrecisionPolicy`` computes in bf16 and reduces gradients in fp32; on CPU everything
stays fp32 (bitwise-reproducible runs). Weights are materialized with ``to_empty`` and filled
by :func:`pretrain.model.transformer.init_weights`, which gives identical values for any world
size.

``compute.activation_checkpointing`` applies the composable
``torch.distributed._composable.checkpoint`` to every block and ``compute.compile`` compiles every
block in place (``Module.compile``), both before sharding (torchtitan's order). Neither changes
parameter names, so checkpoints, init and export are the same with or without them.

With ``world_size == 1`` the model is a plain ``nn.Module`` (no FSDP): one process needs no
sharding, and DCP checkpoints of the plain module have the same keys as sharded ones, so a
checkpoint moves freely between 1 and N processes.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from pretrain.distributed import ProcessInfo, data_parallel_mesh
from pretrain.model.config import ModelConfig
from pretrain.model.transformer import Transformer, init_weights
from pretrain.train.config import ComputeConfig


def mixed_precision(proc: ProcessInfo) -> MixedPrecisionPolicy:
    if proc.device.type == "cuda":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def build_model(
    cfg: ModelConfig, proc: ProcessInfo, seed: int, compute: ComputeConfig | None = None
) -> Transformer:
    """The model on ``proc.device``, FSDP2-sharded when distributed, initialized from ``seed``."""
    compute = compute or ComputeConfig()
    with torch.device("meta"):
        model = Transformer(cfg)
    apply_compute_options(model, compute)
    if proc.distributed:
        policy = mixed_precision(proc)
        mesh = data_parallel_mesh(proc)  # one mesh, released by close_process_group
        for block in model.layers:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
    model.to_empty(device=proc.device)
    if not proc.distributed:
        model.tie_weights()
    init_weights(model, seed)
    return model


def apply_compute_options(model: Transformer, compute: ComputeConfig) -> None:
    """Activation checkpointing and ``torch.compile`` per block, in place, names unchanged."""
    for block in model.layers:
        if compute.activation_checkpointing:
            from torch.distributed._composable import checkpoint

            checkpoint(block)  # recompute this block's forward during backward
        if compute.compile:
            block.compile(backend=compute.compile_backend, fullgraph=False)


def autocast(proc: ProcessInfo) -> contextlib.AbstractContextManager:
    """bf16 autocast for a single-GPU run (FSDP's policy does this job when sharded)."""
    if proc.device.type == "cuda" and not proc.distributed:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def set_gradient_sync(model: nn.Module, enabled: bool) -> None:
    """Skip FSDP's reduce-scatter on all but the last micro-batch of a step."""
    if isinstance(model, FSDPModule):
        model.set_requires_gradient_sync(enabled)


def clip_grad_norm(model: nn.Module, max_norm: float) -> float:
    """Clip by the global gradient norm (over all shards); returns the pre-clip norm."""
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if hasattr(norm, "full_tensor"):  # DTensor when sharded
        norm = norm.full_tensor()
    return float(norm)
