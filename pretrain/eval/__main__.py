"""Evaluate a checkpoint from the shell (one process, CPU by default).

    python -m pretrain.eval --checkpoint runs/b00/step-00000040 \\
        --packed artifacts/packed_tokens --out artifacts/eval_reports/b00-s000000040 \\
        [--max-sequences-per-source 256] [--batch-size 8] [--device cpu|cuda|auto]

Prints the metadata dict as JSON; writes report.json and report.md under --out.
"""

from __future__ import annotations

import argparse
import json
import sys

from pretrain.eval.evaluate import EvalConfig, evaluate_checkpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretrain.eval")
    parser.add_argument("--checkpoint", required=True, help="committed step-<N> directory")
    parser.add_argument("--packed", required=True, help="packed_tokens directory (val split)")
    parser.add_argument("--out", required=True, help="output directory URI (local or s3://)")
    parser.add_argument("--max-sequences-per-source", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    args = parser.parse_args(argv)
    config = EvalConfig(
        max_sequences_per_source=args.max_sequences_per_source,
        batch_size=args.batch_size,
        device=args.device,
    )
    stats = evaluate_checkpoint(args.checkpoint, args.packed, args.out, config)
    print(json.dumps(stats.as_metadata(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
