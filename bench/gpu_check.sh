#!/usr/bin/env bash
# GPU check for a CUDA machine (issue 6): bf16 matmul peak, then a ~1B Llama at seq 2048 in bf16
# (flash-attn when importable, FSDP2 on one GPU, torch.compile per block) through the trainer's
# own step; prints tokens/s and MFU and ends with one JSON line. Then (issue 8) batched eval scoring
# on the GPU against the naive loop, with the scores checked against the CPU's: a second JSON line.
# Self-contained; under 8 minutes.
#
#   bash bench/gpu_check.sh                  # uses .venv/bin/python if present, else python3
#   GPU_CHECK_ARGS="--no-compile --micro-batch 8" bash bench/gpu_check.sh
#
# Exit status: 0 ok, 2 no CUDA device (a clear message, nothing run), other: failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: no CUDA device visible to $PY (torch $("$PY" -c 'import torch; print(torch.__version__)')); run on a GPU machine" >&2
  exit 2
fi
"$PY" -c 'import flash_attn' 2>/dev/null && echo "flash-attn: available" || echo "flash-attn: not importable, using SDPA"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader || true
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
timeout 400 "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 \
  bench/gpu_check.py ${GPU_CHECK_ARGS:-}
# eval scoring on the GPU (a tokenizer is trained on the task text when no demo output exists)
timeout 60 "$PY" bench/eval_throughput.py --device cuda --compare-cpu --examples 300 \
  --batch-size 64 --repeats 2 --threads 8 \
  || echo "gpu_check: eval scoring on the GPU failed or timed out (exit $?)" >&2
