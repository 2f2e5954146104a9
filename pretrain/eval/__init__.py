"""Validation of checkpoints: loss, perplexity and bits per token, per source and overall.

    from pretrain.eval import EvalConfig, evaluate_checkpoint
    stats = evaluate_checkpoint("runs/b00/step-00000040", "artifacts/packed_tokens",
                                "artifacts/eval_reports/b00-s000000040", EvalConfig())
    stats.as_metadata()   # {"val_loss": ..., "perplexity": ..., "loss/code": ..., ...}

or from a shell::

    python -m pretrain.eval --checkpoint runs/b00/step-00000040 \\
        --packed artifacts/packed_tokens --out artifacts/eval_reports/b00-s000000040

Importing this package does not import torch (evaluation loads it when it runs).
"""

from pretrain.eval.evaluate import EvalConfig, evaluate_checkpoint
from pretrain.eval.report import EvalStats, SourceStats

__all__ = ["EvalConfig", "EvalStats", "SourceStats", "evaluate_checkpoint"]
