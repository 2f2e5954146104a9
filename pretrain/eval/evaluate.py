"""Evaluate one checkpoint on the packed validation split, per source and overall.

    stats = evaluate_checkpoint(checkpoint_dir, packed_dir, output_dir_uri, EvalConfig())

Loads the checkpoint in this process (no process group; any number of training ranks wrote
it), scores the first ``max_sequences_per_source`` sequences of each validation source
(``val`` files grouped by their ``source``; files without one count as ``default``) with
next-token cross-entropy, and writes ``report.json`` and ``report.md`` under
``output_dir_uri`` (local or ``s3://``) through :mod:`pretrain.storage`. The loss is
token-weighted (pad targets are not scored); ``perplexity = exp(loss)`` and ``bits_per_token
= loss / ln 2``. A non-finite number raises :class:`CheckpointError` instead of being reported.
The checkpoint's tokenizer hash must match the packed data's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pretrain
from pretrain import storage
from pretrain.errors import ConfigError, DataError
from pretrain.eval.report import OVERALL, EvalStats, SourceStats, render_markdown
from pretrain.train.checkpoint import checkpoint_key, read_meta
from pretrain.train.data import PackedIndex, PackedSplit, read_packed_index

DEFAULT_SOURCE = "default"


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    max_sequences_per_source: int = 256
    batch_size: int = 8
    device: str = "cpu"  # "cpu", "cuda" or "auto" (cuda when available)

    def __post_init__(self) -> None:
        if self.max_sequences_per_source <= 0 or self.batch_size <= 0:
            raise ConfigError("EvalConfig.max_sequences_per_source and batch_size must be >= 1")
        if self.device not in ("cpu", "cuda", "auto"):
            raise ConfigError(f"EvalConfig.device={self.device!r}; use 'cpu', 'cuda' or 'auto'")


def val_sources(index: PackedIndex) -> list[str | None]:
    """Distinct ``source`` values of the val files, in index order."""
    seen: dict[str | None, None] = {}
    for shard in index.files("val"):
        seen.setdefault(shard.source, None)
    return list(seen)


def _score(model: Any, split: PackedSplit, cfg: EvalConfig, device: Any, ignore_index: int):
    """(num_sequences, num_tokens, summed loss) over the first sequences of ``split``."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    count = min(len(split), cfg.max_sequences_per_source)
    loss_sum, num_tokens = 0.0, 0
    for start in range(0, count, cfg.batch_size):
        rows = split.rows(np.arange(start, min(count, start + cfg.batch_size)))
        batch = torch.from_numpy(rows).to(device)
        targets = batch[:, 1:]
        logits = model(batch[:, :-1]).float()
        loss = F.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index, reduction="sum"
        )
        loss_sum += float(loss)
        num_tokens += int((targets != ignore_index).sum())
    return count, num_tokens, loss_sum


def evaluate_checkpoint(
    checkpoint_dir: str, packed_dir: str, output_dir_uri: str, config: EvalConfig
) -> EvalStats:
    import torch

    from pretrain.train.checkpoint import load_consolidated_model

    meta = read_meta(checkpoint_dir)
    index = read_packed_index(packed_dir)
    trained_on = meta.get("lineage", {}).get("tokenizer_sha256")
    if trained_on and trained_on != index.tokenizer_sha256:
        raise DataError(
            f"checkpoint was trained with tokenizer {trained_on[:12]}…, {packed_dir} was packed "
            f"with {index.tokenizer_sha256[:12]}…; evaluate on data from the same tokenizer"
        )
    use_cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if use_cuda else "cpu")
    model = load_consolidated_model(checkpoint_dir).to(device)
    ignore_index = index.pad_id if index.pad_id not in (index.eos_id, index.bos_id) else -100

    per_source: list[SourceStats] = []
    with torch.no_grad():
        for source in val_sources(index):
            split = PackedSplit(index, "val", source=source)
            n_seq, n_tok, loss_sum = _score(model, split, config, device, ignore_index)
            per_source.append(
                SourceStats.from_sums(source or DEFAULT_SOURCE, n_seq, n_tok, loss_sum)
            )
    if not per_source:
        raise DataError(f"{packed_dir}: the val split has no files; pack a validation split")
    overall = SourceStats.from_sums(
        OVERALL,
        sum(s.num_sequences for s in per_source),
        sum(s.num_tokens for s in per_source),
        sum(s.loss * s.num_tokens for s in per_source),
    )
    step, branch = int(meta["step"]), str(meta["branch"])
    report_uri = storage.join(output_dir_uri, "report.json")
    stats = EvalStats(
        checkpoint_dir=str(checkpoint_dir),
        checkpoint_key=checkpoint_key(branch, step),
        branch=branch,
        step=step,
        report_uri=report_uri,
        overall=overall,
        per_source=tuple(per_source),
    )
    lineage = {
        **meta.get("lineage", {}),
        "packed_dir": str(packed_dir),
        "tokenizer_sha256": index.tokenizer_sha256,
        "code_version": pretrain.__version__,
    }
    report = {**stats.to_dict(), "lineage": lineage, "config": config.__dict__.copy()}
    storage.write_json(report, report_uri)
    storage.write_bytes(
        render_markdown(stats, lineage).encode(), storage.join(output_dir_uri, "report.md")
    )
    return stats
