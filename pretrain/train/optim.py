"""AdamW and the learning-rate schedules: warmup + cosine, or warmup-stable-decay (WSD).

    optimizer = build_optimizer(model, cfg.optim)
    lr = lr_at(step, cfg.optim, lr_scale=cfg.run.lr_scale)   # step is 1-based
    set_lr(optimizer, lr)

The schedule is a pure function of the step, so the checkpoint only needs the step number to
restore it: linear warmup ``lr * step / warmup_steps`` for ``step <= warmup_steps``, then

- ``cosine``: a cosine from ``lr`` down to ``lr * min_lr_ratio`` at ``schedule_steps``;
- ``wsd``: ``lr`` held until the last ``decay_fraction`` of ``schedule_steps``, then a linear
  decay to ``lr * min_lr_ratio`` at ``schedule_steps`` (MiniCPM, OLMo-2's annealing).

Both hold the floor after ``schedule_steps``.
``lr_scale`` multiplies the whole curve (the recovery loop lowers it after a loss spike).
Weight decay applies to matrices only (not to norm gains).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from pretrain.train.config import OptimConfig


def lr_at(step: int, cfg: OptimConfig, lr_scale: float = 1.0) -> float:
    if cfg.warmup_steps and step <= cfg.warmup_steps:
        return lr_scale * cfg.lr * step / cfg.warmup_steps
    floor = cfg.min_lr_ratio
    if cfg.schedule == "wsd":
        decay_start = max(cfg.warmup_steps, cfg.schedule_steps - wsd_decay_steps(cfg))
        decay_steps = cfg.schedule_steps - decay_start
        progress = 1.0 if decay_steps <= 0 else (step - decay_start) / decay_steps
        remaining = 1.0 - min(1.0, max(0.0, progress))
        return lr_scale * cfg.lr * (floor + (1.0 - floor) * remaining)
    decay_steps = cfg.schedule_steps - cfg.warmup_steps
    progress = 1.0 if decay_steps <= 0 else min(1.0, (step - cfg.warmup_steps) / decay_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr_scale * cfg.lr * (floor + (1.0 - floor) * cosine)


def wsd_decay_steps(cfg: OptimConfig) -> int:
    """Length of the WSD decay phase: ``decay_fraction`` of ``schedule_steps``, at least 1."""
    return max(1, round(cfg.decay_fraction * cfg.schedule_steps))


def build_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.AdamW:
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for param in model.parameters():
        if param.requires_grad:
            (decay if param.ndim >= 2 else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # foreach=True picks the same kernels with or without sharding; fused is CUDA-only
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, foreach=True)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
