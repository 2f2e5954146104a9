"""One optimizer update: the objective (cross-entropy + optional z-loss) and the step itself.

    out = train_step(model, optimizer, reader, lr=3e-4, accum=2, micro_batch=8,
                     proc=proc, grad_clip=1.0, ignore_index=2, z_loss_weight=1e-4)
    out.loss, out.z_loss, out.grad_norm, out.data_wait_s

The step reads this rank's slice of the next global batch (the time spent there is
``data_wait_s``: the reader is synchronous, so this is all the time the model waited for data),
runs ``accum`` forward/backward passes with FSDP's gradient reduce-scatter only on the last,
clips the global gradient norm, and applies AdamW at ``lr``. The reported ``loss`` is the
cross-entropy alone (comparable across runs with and without z-loss), averaged over
micro-batches and ranks; ``z_loss`` is the unweighted auxiliary term, or None when its weight
is 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from pretrain.distributed import ProcessInfo
from pretrain.packing.order import BatchReader
from pretrain.train.optim import set_lr
from pretrain.train.parallel import autocast, clip_grad_norm, set_gradient_sync


@dataclass(frozen=True, kw_only=True)
class StepOutput:
    loss: float
    z_loss: float | None
    grad_norm: float
    data_wait_s: float


def language_model_loss(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int, z_loss_weight: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(objective, cross-entropy, z-loss or None) over the non-ignored target positions.

    z-loss = mean over scored tokens of ``logsumexp(logits)²`` (PaLM §5); the objective is
    ``cross_entropy + z_loss_weight · z_loss``. Computed in fp32 whatever the logits' dtype."""
    flat_logits, flat_targets = logits.float().flatten(0, 1), targets.flatten()
    ce = F.cross_entropy(flat_logits, flat_targets, ignore_index=ignore_index)
    if not z_loss_weight:
        return ce, ce, None
    scored = (flat_targets != ignore_index).float()
    log_z = torch.logsumexp(flat_logits, dim=-1)
    z_loss = (log_z.pow(2) * scored).sum() / scored.sum().clamp(min=1.0)
    return ce + z_loss_weight * z_loss, ce, z_loss


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    reader: BatchReader,
    *,
    lr: float,
    accum: int,
    micro_batch: int,
    proc: ProcessInfo,
    grad_clip: float,
    ignore_index: int,
    z_loss_weight: float = 0.0,
    inject_nan: bool = False,
) -> StepOutput:
    """One optimizer update on this rank's slice of the next global batch (collective).

    ``inject_nan`` (tests only, ``run.inject_nan_at_step``) turns the logits into NaN."""
    set_lr(optimizer, lr)
    waited = time.perf_counter()
    batch = torch.from_numpy(reader.next_batch())
    data_wait_s = time.perf_counter() - waited
    sums = torch.zeros(2, device=proc.device)  # [cross-entropy, z-loss]
    for i in range(accum):
        tokens = batch[i * micro_batch : (i + 1) * micro_batch].to(proc.device, non_blocking=True)
        set_gradient_sync(model, i == accum - 1)
        with autocast(proc):
            logits = model(tokens[:, :-1])
        if inject_nan:
            logits = logits * float("nan")
        objective, ce, z_loss = language_model_loss(
            logits, tokens[:, 1:], ignore_index, z_loss_weight
        )
        (objective / accum).backward()
        sums[0] += ce.detach()
        if z_loss is not None:
            sums[1] += z_loss.detach()
    grad_norm = clip_grad_norm(model, grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    means = sums / accum
    if proc.distributed:
        dist.all_reduce(means)
        means /= proc.world_size
    loss, z_mean = means.tolist()
    return StepOutput(
        loss=loss,
        z_loss=z_mean if z_loss_weight else None,
        grad_norm=grad_norm,
        data_wait_s=data_wait_s,
    )
