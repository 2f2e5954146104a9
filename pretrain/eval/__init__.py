"""Evaluation of checkpoints: held-out loss / perplexity / bits per token and per byte per
source, zero-shot multiple-choice tasks (HellaSwag, ARC-Easy, BLiMP), sampled generations, and
the cross-checkpoint comparison.

    from pretrain.eval import EvalConfig, default_tasks, evaluate_checkpoint
    config = EvalConfig(tasks=default_tasks(max_examples=200)  # the task cache (pretrain evals fetch))
    stats = evaluate_checkpoint("runs/b00/step-00000040", "artifacts/packed_tokens",
                                "artifacts/eval_reports/b00-s000000040", config,
                                tokenizer_uri="artifacts/tokenizer")
    stats.as_metadata()   # {"val_loss": ..., "bits_per_byte": ..., "acc/blimp": ..., ...}

    from pretrain.eval import compare_reports
    comparison = compare_reports(["artifacts/eval_reports/b00-s000000020", ...], "out/compare")

or from a shell::

    python -m pretrain.eval --checkpoint runs/b00/step-00000040 \\
        --packed artifacts/packed_tokens --tokenizer artifacts/tokenizer \\
        --out artifacts/eval_reports/b00-s000000040

Importing this package does not import torch (evaluation loads it when it runs).
"""

from pretrain.eval.compare import Comparison, compare_reports
from pretrain.eval.evaluate import EvalConfig, evaluate_checkpoint
from pretrain.eval.generate import GenerationConfig
from pretrain.eval.report import EvalStats, SourceStats
from pretrain.eval.tasks import TaskSpec, default_tasks

__all__ = [
    "Comparison",
    "EvalConfig",
    "EvalStats",
    "GenerationConfig",
    "SourceStats",
    "TaskSpec",
    "compare_reports",
    "default_tasks",
    "evaluate_checkpoint",
]
