"""Evaluate one checkpoint: held-out loss per source, zero-shot tasks, sampled generations.

    config = EvalConfig(tasks=default_tasks(max_examples=200)  # the task cache (pretrain evals fetch))
    stats = evaluate_checkpoint(checkpoint_dir, packed_dir, output_dir_uri, config,
                                tokenizer_uri="art/tokenizer")

Loads the checkpoint in this process (no process group; any number of training ranks wrote
it), scores ``max_sequences_per_source`` sequences of each validation source (``val`` files
grouped by their ``source``; files without one count as ``default``), evenly spaced over it
(all of them when it has fewer: the first ones would be a few documents, as packing keeps a
document's sequences together), with next-token cross-entropy, and writes ``report.json`` and
``report.md`` under ``output_dir_uri`` (local or ``s3://``) through :mod:`pretrain.storage`. The loss is
token-weighted (pad targets are not scored); ``perplexity = exp(loss)`` and ``bits_per_token
= loss / ln 2``. A non-finite number raises :class:`CheckpointError` instead of being reported.
The checkpoint's tokenizer hash must match the packed data's.

With ``tokenizer_uri`` (its sha256 must be the packed data's) the report adds bits per byte per
source (:mod:`pretrain.eval.tokens`), the multiple-choice tasks of ``config.tasks``
(:mod:`pretrain.eval.tasks`, scored by :mod:`pretrain.eval.scoring`; a task whose file is
absent is reported ``skipped`` with the path) and ``config.generation`` samples. Without it
those parts are reported skipped ("no tokenizer given"), never silently left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pretrain
from pretrain import storage
from pretrain.checkpoint.dcp import checkpoint_key, read_meta
from pretrain.errors import ConfigError, DataError
from pretrain.eval.generate import GenerationConfig, generate
from pretrain.eval.report import OVERALL, EvalStats, SourceStats, render_markdown
from pretrain.eval.tasks import TaskSpec, default_tasks, load_task
from pretrain.packing.format import PackedIndex, PackedSplit, read_packed_index
from pretrain.settings import check_types

DEFAULT_SOURCE = "default"


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    max_sequences_per_source: int = 256
    batch_size: int = 8
    device: str = "cpu"  # "cpu", "cuda" or "auto" (cuda when available)
    tasks: tuple[TaskSpec, ...] = ()  # explicit tasks; empty: the default tasks of task_dir
    # HellaSwag, ARC-Easy, BLiMP files when ``tasks`` is empty: None is the task cache
    # (``pretrain evals fetch``: $PRETRAIN_EVAL_DIR, else ~/.cache/pretrain/eval); "" scores none
    task_dir: str | None = None
    max_examples_per_task: int = 200  # per default task
    task_batch_size: int = 32  # multiple-choice requests per forward pass
    task_seed: int = 0  # which examples a capped task file contributes
    generation: GenerationConfig | None = GenerationConfig()

    def task_specs(self) -> tuple[TaskSpec, ...]:
        """``tasks``, or the default tasks read from ``task_dir`` when none are given (an empty
        ``task_dir``: no tasks; None: the task cache)."""
        if self.tasks or self.task_dir == "":
            return self.tasks
        return default_tasks(self.task_dir, self.max_examples_per_task)

    def __post_init__(self) -> None:
        check_types(self)
        if min(self.max_sequences_per_source, self.batch_size, self.task_batch_size) <= 0:
            raise ConfigError(
                "EvalConfig.max_sequences_per_source, batch_size and task_batch_size must be >= 1"
            )
        names = [t.name for t in self.tasks]
        if len(set(names)) != len(names):
            raise ConfigError(f"EvalConfig.tasks has duplicate names {names}; set TaskSpec.name")
        if self.device not in ("cpu", "cuda", "auto"):
            raise ConfigError(f"EvalConfig.device={self.device!r}; use 'cpu', 'cuda' or 'auto'")


def val_sources(index: PackedIndex) -> list[str | None]:
    """Distinct ``source`` values of the val files, in index order."""
    seen: dict[str | None, None] = {}
    for shard in index.files("val"):
        seen.setdefault(shard.source, None)
    return list(seen)


def scored_rows(total: int, cap: int) -> Any:
    """Indices of the sequences scored: all ``total`` when ``cap`` allows, else ``cap`` of them
    evenly spaced from the first to the last (``scored_rows(10, 4)`` -> ``[0, 3, 6, 9]``)."""
    import numpy as np

    if total <= cap:
        return np.arange(total)
    return np.unique(np.linspace(0, total - 1, cap).round().astype(np.int64))


def _score(
    model: Any,
    split: PackedSplit,
    cfg: EvalConfig,
    device: Any,
    ignore_index: int,
    byte_lengths: Any | None,
) -> tuple[int, int, float, int | None]:
    """(sequences, tokens, summed loss, bytes or None) over :func:`scored_rows` of ``split``."""
    import torch
    import torch.nn.functional as F

    picked = scored_rows(len(split), cfg.max_sequences_per_source)
    count = len(picked)
    loss_sum, num_tokens, num_bytes = 0.0, 0, 0
    for start in range(0, count, cfg.batch_size):
        rows = split.rows(picked[start : start + cfg.batch_size])
        batch = torch.from_numpy(rows).to(device)
        targets = batch[:, 1:]
        logits = model(batch[:, :-1]).float()
        loss = F.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index, reduction="sum"
        )
        loss_sum += float(loss)
        num_tokens += int((targets != ignore_index).sum())
        if byte_lengths is not None:
            num_bytes += int(byte_lengths[rows[:, 1:]].sum())  # specials (pad, eos) count 0
    return count, num_tokens, loss_sum, num_bytes if byte_lengths is not None else None


def _tasks(
    model: Any, tok: Any, cfg: EvalConfig, device: Any, eos_id: int, pad_id: int
) -> dict[str, dict[str, Any]]:
    """{task name: result dict}; absent files are reported skipped with their path."""
    from pretrain.eval.scoring import score_task

    results: dict[str, dict[str, Any]] = {}
    for spec in cfg.task_specs():
        examples = load_task(spec, seed=cfg.task_seed)
        if examples is None:
            results[spec.name] = {
                "status": "skipped",
                "reason": f"{spec.path} not found (run `pretrain evals fetch`)",
            }
            continue
        result = score_task(
            model, tok, examples, name=spec.name, prefix_id=eos_id,
            batch_size=cfg.task_batch_size, device=device, pad_id=pad_id,
        )  # fmt: skip
        results[spec.name] = {**result.to_dict(), "path": spec.path}
    return results


def evaluate_checkpoint(
    checkpoint_dir: str,
    packed_dir: str,
    output_dir_uri: str,
    config: EvalConfig,
    *,
    tokenizer_uri: str | None = None,
) -> EvalStats:
    """Score a checkpoint on the validation split (per source and overall), on the task files
    and with seeded generations; writes ``report.json`` and ``report.md``."""
    import torch

    from pretrain.checkpoint.dcp import load_consolidated_model
    from pretrain.eval.tokens import load_checked_tokenizer, token_byte_lengths

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
    tok = byte_lengths = None
    if tokenizer_uri is not None:
        tok = load_checked_tokenizer(tokenizer_uri, expected_sha256=index.tokenizer_sha256)
        byte_lengths = token_byte_lengths(tok)
    per_source, empty_sources = _held_out(model, index, config, device, byte_lengths, packed_dir)
    overall = SourceStats.from_sums(
        OVERALL,
        sum(s.num_sequences for s in per_source),
        sum(s.num_tokens for s in per_source),
        sum(s.loss * s.num_tokens for s in per_source),
        None if tok is None else sum(s.num_bytes or 0 for s in per_source),
    )
    skipped = {"status": "skipped", "reason": "no tokenizer given (pass tokenizer_uri)"}
    if tok is None:
        tasks = {spec.name: dict(skipped) for spec in config.task_specs()}
        generations: list[dict[str, Any]] = []
    else:
        tasks = _tasks(model, tok, config, device, index.eos_id, index.pad_id)
        generations = (
            generate(model, tok, config.generation, eos_id=index.eos_id, device=device)
            if config.generation
            else []
        )
    step, branch = int(meta["step"]), str(meta["branch"])
    stats = EvalStats(
        checkpoint_dir=str(checkpoint_dir),
        checkpoint_key=checkpoint_key(branch, step),
        branch=branch,
        step=step,
        report_uri=storage.join(output_dir_uri, "report.json"),
        overall=overall,
        per_source=tuple(per_source),
        tokens_seen=meta.get("tokens_seen"),
        empty_sources=tuple(empty_sources),
        tasks=tasks,
        generations=tuple(generations),
    )
    _write_report(stats, meta, config, packed_dir, index.tokenizer_sha256, output_dir_uri)
    return stats


def _held_out(
    model: Any, index: Any, config: EvalConfig, device: Any, byte_lengths: Any, packed_dir: str
) -> tuple[list[SourceStats], list[str]]:
    """Loss (and bits per byte, with a tokenizer) per source of the validation split, and the
    sources whose validation documents were shorter than one packed sequence."""
    import torch

    ignore_index = index.pad_id if index.pad_id not in (index.eos_id, index.bos_id) else -100
    per_source: list[SourceStats] = []
    empty_sources: list[str] = []
    with torch.no_grad():
        for source in val_sources(index):
            split = PackedSplit(index, "val", source=source)
            if len(split) == 0:
                empty_sources.append(source or DEFAULT_SOURCE)
                continue
            n_seq, n_tok, loss_sum, n_bytes = _score(
                model, split, config, device, ignore_index, byte_lengths
            )
            per_source.append(
                SourceStats.from_sums(source or DEFAULT_SOURCE, n_seq, n_tok, loss_sum, n_bytes)
            )
    if not per_source:
        raise DataError(
            f"{packed_dir}: the val split has no sequences; pack a validation split with "
            "documents longer than seq_len"
        )
    return per_source, empty_sources


def _write_report(
    stats: EvalStats,
    meta: dict[str, Any],
    config: EvalConfig,
    packed_dir: str,
    tokenizer_sha256: str,
    output_dir_uri: str,
) -> None:
    """``report.json`` (the stats, the lineage, the config) and ``report.md``."""
    trained = meta.get("lineage", {})
    lineage = {
        # what the checkpoint is and what it was trained on (its meta.json)
        "checkpoint_identity": meta.get("identity"),
        "trained_on_packed_dir": trained.get("packed_dir"),
        "trained_on_packed_tokens_version": trained.get("packed_tokens_version"),
        "train_config_sha256": trained.get("config_sha256"),
        "parent": trained.get("parent"),
        # what this report scored it on
        "packed_dir": str(packed_dir),
        "tokenizer_sha256": tokenizer_sha256,
        "code_version": pretrain.__version__,
    }
    report = {**stats.to_dict(), "lineage": lineage, "config": dataclasses.asdict(config)}
    storage.write_json(report, stats.report_uri)
    storage.write_bytes(
        render_markdown(stats, lineage).encode(), storage.join(output_dir_uri, "report.md")
    )
