"""GPU check: bf16 matmul peak, then a ~1B Llama (seq 2048, bf16, flash-attn when importable,
FSDP2 on one GPU) through the trainer's own step; prints tokens/s and MFU, then one JSON line.

    bash bench/gpu_check.sh                      # the entry point: checks CUDA, runs this
    torchrun --standalone --nproc_per_node=1 bench/gpu_check.py --steps 30 --micro-batch 4

MFU = flops_per_token(model, 2048) × tokens/s ÷ peak, against the table peak (H100/H200 989,
A100 312 bf16 TFLOP/s, :data:`pretrain.train.metrics.PEAK_FLOPS`) and against the measured
matmul peak. Target (issue 6): MFU ≥ 45% of the table peak. Without CUDA it exits 2 with a
message; :func:`matmul_tflops` and :func:`summarize` also run on CPU (tests use them).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def matmul_tflops(n: int, iters: int, device: str, dtype: torch.dtype = torch.bfloat16) -> float:
    """Achieved dense matmul TFLOP/s for (n×n)·(n×n) in ``dtype`` (2n³ FLOPs each)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    started = time.perf_counter()
    for _ in range(iters):
        a @ b
    sync()
    return 2 * n**3 * iters / (time.perf_counter() - started) / 1e12


def summarize(
    *, flops_per_token: float, tokens_per_s: float, table_peak: float, measured_peak: float
) -> dict[str, float]:
    """MFU against the table peak and against the measured matmul peak (both FLOP/s)."""
    achieved = flops_per_token * tokens_per_s
    return {
        "tokens_per_s": round(tokens_per_s, 1),
        "model_tflops": round(achieved / 1e12, 2),
        "mfu_vs_table": round(achieved / table_peak, 4),
        "mfu_vs_measured_matmul": round(achieved / measured_peak, 4),
    }


def write_packed(root: Path, seq_len: int, vocab: int, num_sequences: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    tokens = np.random.default_rng(0).integers(3, vocab, (num_sequences, seq_len), dtype=np.uint32)
    tokens.astype("<u2").tofile(root / "train.bin")
    index = {"format": 1, "seq_len": seq_len, "vocab_size": vocab, "dtype": "uint16",
             "eos_id": 0, "bos_id": 1, "pad_id": 2, "tokenizer_sha256": "00" * 32,
             "splits": {"train": {"files": [{"file": "train.bin",
                                             "num_sequences": num_sequences}]}}}  # fmt: skip
    (root / "index.json").write_text(json.dumps(index))
    (root / "_COMMITTED").write_text("{}")


def train_throughput(args: argparse.Namespace) -> dict[str, object]:
    from torch.distributed.fsdp import fully_shard

    from pretrain.distributed import ProcessInfo, init_process_group
    from pretrain.model import flops_per_token, num_params
    from pretrain.model.recipes import llama_1b
    from pretrain.model.transformer import Transformer, flash_attn_func, init_weights
    from pretrain.packing.format import PackedSplit, read_packed_index
    from pretrain.packing.order import BatchReader
    from pretrain.train.config import ComputeConfig, OptimConfig
    from pretrain.train.metrics import peak_flops_per_device
    from pretrain.train.optim import build_optimizer
    from pretrain.train.parallel import apply_compute_options, mixed_precision
    from pretrain.train.step import train_step

    proc = ProcessInfo.from_env()
    init_process_group(proc)
    if not torch.distributed.is_initialized():  # FSDP2 needs a process group even for 1 GPU
        torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    cfg = llama_1b(vocab_size=32000, max_seq_len=args.seq_len)
    packed = Path(tempfile.mkdtemp()) / "packed"
    global_batch = args.micro_batch * args.accum
    write_packed(packed, args.seq_len + 1, 32000, global_batch * (args.steps + 1))
    with torch.device("meta"):
        model = Transformer(cfg)
    apply_compute_options(
        model, ComputeConfig(activation_checkpointing=args.ac, compile=args.compile)
    )
    for block in model.layers:
        fully_shard(block, mp_policy=mixed_precision(proc))
    fully_shard(model, mp_policy=mixed_precision(proc))
    model.to_empty(device=proc.device)
    init_weights(model, seed=0)
    optimizer = build_optimizer(model, OptimConfig(lr=2e-4, warmup_steps=0, schedule_steps=1))
    reader = BatchReader(PackedSplit(read_packed_index(str(packed)), "train"),
                         global_batch=global_batch, seed=0, rank=0, world_size=1)  # fmt: skip
    times = []
    for step in range(args.steps):
        out = train_step(model, optimizer, reader, lr=2e-4, accum=args.accum,
                         micro_batch=args.micro_batch, proc=proc, grad_clip=1.0,
                         ignore_index=-100)  # fmt: skip
        torch.cuda.synchronize()
        times.append(time.perf_counter())
        print(f"step {step + 1}/{args.steps} loss {out.loss:.3f}", flush=True)
    timed = args.steps - args.warmup
    tokens_per_s = global_batch * args.seq_len * timed / (times[-1] - times[args.warmup - 1])
    return {
        "num_params": num_params(cfg),
        "flops_per_token": flops_per_token(cfg, args.seq_len),
        "tokens_per_s": tokens_per_s,
        "table_peak": peak_flops_per_device(proc.device),
        "flash_attn": flash_attn_func is not None,
        "memory_gb": round(torch.cuda.max_memory_allocated() / 2**30, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--ac", action=argparse.BooleanOptionalAction, default=False)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device visible; run it on a GPU machine", file=sys.stderr)
        return 2
    measured = matmul_tflops(8192, 50, "cuda")
    print(f"bf16 matmul peak (8192^3): {measured:.1f} TFLOP/s on {torch.cuda.get_device_name()}")
    run = train_throughput(args)
    summary = summarize(
        flops_per_token=run["flops_per_token"],
        tokens_per_s=run["tokens_per_s"],
        table_peak=run["table_peak"],
        measured_peak=measured * 1e12,
    )
    print(f"tokens/s {summary['tokens_per_s']:.0f}  MFU {100 * summary['mfu_vs_table']:.1f}% "
          f"(table)  {100 * summary['mfu_vs_measured_matmul']:.1f}% (measured matmul)")  # fmt: skip
    print(json.dumps({"bench": "gpu_check", "device": torch.cuda.get_device_name(),
                      "matmul_tflops": round(measured, 1), **summary,
                      **{k: run[k] for k in ("num_params", "flash_attn", "memory_gb")},
                      "compile": args.compile, "activation_checkpointing": args.ac}))  # fmt: skip
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
