"""Evaluate a checkpoint from the shell (one process, CPU by default; no training job needed).

    python -m pretrain.eval --checkpoint runs/b00/step-00000040 \\
        --packed artifacts/packed_tokens --out artifacts/eval_reports/b00-s000000040 \\
        [--tokenizer artifacts/tokenizer] [--task-dir DIR] \\
        [--max-examples-per-task 200] [--max-sequences-per-source 256] [--batch-size 8] \\
        [--device cpu|cuda|auto] [--no-generations]

Works on a checkpoint written by any number of FSDP ranks (DCP reshards on load). Prints the
metadata dict as JSON; writes report.json and report.md under --out. Without --tokenizer the
report has loss, perplexity and bits per token only (tasks are reported skipped).
"""

from __future__ import annotations

import argparse
import json
import sys

from pretrain.eval.evaluate import EvalConfig, evaluate_checkpoint
from pretrain.eval.generate import GenerationConfig
from pretrain.eval.tasks import default_tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretrain.eval")
    parser.add_argument("--checkpoint", required=True, help="committed step-<N> directory")
    parser.add_argument("--packed", required=True, help="packed_tokens directory (val split)")
    parser.add_argument("--out", required=True, help="output directory URI (local or s3://)")
    parser.add_argument("--tokenizer", default=None, help="tokenizer directory or tokenizer.json")
    parser.add_argument("--task-dir", default=None, help="folder with the task files")
    parser.add_argument("--max-examples-per-task", type=int, default=200)
    parser.add_argument("--max-sequences-per-source", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--no-generations", action="store_true")
    args = parser.parse_args(argv)
    tasks = default_tasks(args.task_dir, args.max_examples_per_task) if args.task_dir else ()
    config = EvalConfig(
        max_sequences_per_source=args.max_sequences_per_source,
        batch_size=args.batch_size,
        device=args.device,
        tasks=tasks,
        generation=None if args.no_generations else GenerationConfig(),
    )
    stats = evaluate_checkpoint(
        args.checkpoint, args.packed, args.out, config, tokenizer_uri=args.tokenizer
    )
    print(json.dumps(stats.as_metadata(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
