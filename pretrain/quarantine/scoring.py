"""Suspicion per document: which documents of a skip window did the healthy model find bad?

The ledger names every document piece a skip window read (:func:`window_pieces`); each piece is
scored with the rolled-back-to (healthy) checkpoint on CPU, in the context the trainer saw (the
whole packed sequence), and the per-token losses are summed per document::

    docs = score_window(packed_dir, plan, (41, 43), healthy_checkpoint="runs/b00/step-00000030",
                        after_checkpoint=None, config=QuarantineConfig())
    docs.sort_by([("suspicion", "descending")]).slice(0, 5).to_pylist()

``suspicion`` is the document's mean next-token loss under the healthy checkpoint minus that
checkpoint's mean loss on a fixed sample of ``config.reference_sequences`` train sequences
outside the window (nats per token): a document the model that was doing fine found much
harder than ordinary data is what a spike is made of (random tokens, another language, binary
junk). The baseline does not depend on how much of the window is bad. With ``after_checkpoint`` (a checkpoint the spiking branch wrote after the
window, when one exists) the table adds ``loss_after`` and ``loss_delta``. Only the first
``config.max_sequences`` sequences are scored; documents only in later ones have a null score and
``scored_tokens == 0``. Torch is imported only when scoring runs; never imports dagster.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.errors import DataError
from pretrain.packing.format import PackedSplit, read_packed_index
from pretrain.packing.ledger import BatchPlan, trace_steps
from pretrain.quarantine.config import QuarantineConfig

PIECE_COLUMNS = ["step", "seq_index", "doc_id", "source", "token_start", "token_end", "tokens"]


def window_pieces(packed_dir: str, plan: BatchPlan, window: tuple[int, int]) -> pa.Table:
    """Every document piece read by steps ``[window[0], window[1])``, with ``source_id`` (null
    when the ledger predates provenance columns)."""
    start, end = window
    ledger_uri = storage.join(packed_dir, "ledger.parquet")
    if not storage.exists(ledger_uri):
        raise DataError(f"{packed_dir} has no ledger.parquet: repack to trace steps to documents")
    table = trace_steps(packed_dir, plan, list(range(start, end)))
    out = table.select(PIECE_COLUMNS)
    names = pq.ParquetFile(storage.local_path(ledger_uri)).schema_arrow.names
    if "source_id" in names:  # ledgers packed with provenance (source_id kept from the input)
        out = out.append_column("source_id", table["source_id"].cast(pa.string()))
    else:
        out = out.append_column("source_id", pa.nulls(out.num_rows, pa.string()))
    return out


def _token_losses(
    model: Any, rows: np.ndarray, ignore_index: int, config: QuarantineConfig
) -> tuple[np.ndarray, np.ndarray]:
    """(per-target loss, valid mask), each (len(rows), seq_len - 1); target t sits at t - 1."""
    import torch
    import torch.nn.functional as F

    losses: list[np.ndarray] = []
    valid: list[np.ndarray] = []
    with torch.no_grad():
        for lo in range(0, len(rows), config.batch_size):
            batch = torch.from_numpy(rows[lo : lo + config.batch_size])
            targets = batch[:, 1:]
            logits = model(batch[:, :-1]).float()
            loss = F.cross_entropy(
                logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index, reduction="none"
            ).view(targets.shape)
            losses.append(loss.numpy().astype(np.float64))
            valid.append((targets != ignore_index).numpy())
    return np.concatenate(losses), np.concatenate(valid)


def _load(packed_dir: str, checkpoint_dir: str) -> tuple[Any, Any, int]:
    """(model on CPU, packed index, ignored target id); refuses a checkpoint of other data."""
    from pretrain.checkpoint.dcp import load_consolidated_model, read_meta

    index = read_packed_index(packed_dir)
    meta = read_meta(checkpoint_dir)
    trained_on = meta.get("lineage", {}).get("tokenizer_sha256")
    if trained_on and trained_on != index.tokenizer_sha256:
        raise DataError(
            f"{checkpoint_dir} was trained with tokenizer {trained_on[:12]}…, {packed_dir} "
            f"was packed with {index.tokenizer_sha256[:12]}…; score with the run's own data"
        )
    # the ledger must still be the one the run read: a repack moves documents between steps
    expected = meta.get("data_state", {}).get("num_sequences")
    found = sum(f.num_sequences for f in index.files("train"))
    if expected is not None and int(expected) != found:
        raise DataError(
            f"{packed_dir} holds {found} train sequences, the run read {expected}: it was "
            "repacked since, so its ledger no longer names this window's documents; quarantine "
            "a decision before rebuilding the corpus"
        )
    ignore = index.pad_id if index.pad_id not in (index.eos_id, index.bos_id) else -100
    return load_consolidated_model(checkpoint_dir), index, ignore


def reference_loss(
    packed_dir: str, checkpoint_dir: str, exclude: set[int], config: QuarantineConfig
) -> float | None:
    """Mean next-token loss of ``checkpoint_dir`` on ``config.reference_sequences`` train
    sequences outside ``exclude`` (a fixed sample): what "normal" data costs this model."""
    model, index, ignore = _load(packed_dir, checkpoint_dir)
    split = PackedSplit(index, "train")
    pool = np.setdiff1d(np.arange(len(split)), np.fromiter(exclude, np.int64, len(exclude)))
    if len(pool) == 0:
        return None
    take = min(config.reference_sequences, len(pool))
    seqs = np.sort(np.random.default_rng(config.seed).choice(pool, size=take, replace=False))
    loss, valid = _token_losses(model, split.rows(seqs), ignore, config)
    return float(loss[valid].mean()) if valid.any() else None


def piece_losses(
    packed_dir: str, checkpoint_dir: str, pieces: pa.Table, config: QuarantineConfig
) -> tuple[np.ndarray, np.ndarray]:
    """(summed loss, scored tokens) per piece under ``checkpoint_dir``; pieces of sequences past
    the first ``config.max_sequences`` get (0, 0)."""
    model, index, ignore = _load(packed_dir, checkpoint_dir)
    seqs = list(dict.fromkeys(pieces["seq_index"].to_pylist()))[: config.max_sequences]
    row_of = {s: i for i, s in enumerate(seqs)}
    rows = PackedSplit(index, "train").rows(np.asarray(seqs, dtype=np.int64))
    loss, valid = _token_losses(model, rows, ignore, config)
    zeros = np.zeros((len(seqs), 1))
    loss_cum = np.concatenate([zeros, np.cumsum(np.where(valid, loss, 0.0), axis=1)], axis=1)
    count_cum = np.concatenate([zeros, np.cumsum(valid, axis=1)], axis=1)
    sums = np.zeros(pieces.num_rows)
    counts = np.zeros(pieces.num_rows, dtype=np.int64)
    starts, ends = pieces["token_start"].to_numpy(), pieces["token_end"].to_numpy()
    for i, seq in enumerate(pieces["seq_index"].to_pylist()):
        row = row_of.get(seq)
        if row is None:
            continue
        # targets t in [max(start, 1), end) are losses t - 1 in [lo, hi)
        lo, hi = max(int(starts[i]), 1) - 1, int(ends[i]) - 1
        if hi > lo:
            sums[i] = loss_cum[row, hi] - loss_cum[row, lo]
            counts[i] = int(count_cum[row, hi] - count_cum[row, lo])
    return sums, counts


def _per_document(pieces: pa.Table, sums: np.ndarray, counts: np.ndarray) -> dict[str, dict]:
    docs: dict[str, dict] = {}
    for i, row in enumerate(pieces.to_pylist()):
        doc = docs.setdefault(
            row["doc_id"],
            {
                "doc_id": row["doc_id"],
                "source": row["source"],
                "source_id": row["source_id"],
                "steps": [],
                "tokens": 0,
                "scored_tokens": 0,
                "loss_sum": 0.0,
            },
        )
        if row["step"] not in doc["steps"]:
            doc["steps"].append(row["step"])
        doc["tokens"] += row["tokens"]
        doc["scored_tokens"] += int(counts[i])
        doc["loss_sum"] += float(sums[i])
    return docs


SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("source_id", pa.string()),
        ("steps", pa.list_(pa.int64())),
        ("tokens", pa.int64()),
        ("scored_tokens", pa.int64()),
        ("loss", pa.float64()),
        ("loss_after", pa.float64()),
        ("loss_delta", pa.float64()),
        ("suspicion", pa.float64()),
    ]
)


def score_window(
    packed_dir: str,
    plan: BatchPlan,
    window: tuple[int, int],
    *,
    healthy_checkpoint: str,
    after_checkpoint: str | None,
    config: QuarantineConfig,
) -> pa.Table:
    """One row per document of the window (first-read order), scored; see the module docstring."""
    pieces = window_pieces(packed_dir, plan, window)
    docs = _per_document(pieces, *piece_losses(packed_dir, healthy_checkpoint, pieces, config))
    after: dict[str, dict] = {}
    if after_checkpoint is not None:
        after = _per_document(pieces, *piece_losses(packed_dir, after_checkpoint, pieces, config))
    for doc_id, doc in docs.items():
        n = doc.pop("scored_tokens")
        doc["scored_tokens"] = n
        doc["loss"] = doc.pop("loss_sum") / n if n else None
        later = after.get(doc_id)
        doc["loss_after"] = later["loss_sum"] / n if later and n else None
        both = doc["loss"] is not None and doc["loss_after"] is not None
        doc["loss_delta"] = doc["loss_after"] - doc["loss"] if both else None
    window_seqs = set(pieces["seq_index"].to_pylist())
    baseline = reference_loss(packed_dir, healthy_checkpoint, window_seqs, config)
    if baseline is None:  # every train sequence is in the window: compare within it
        scored = [d["loss"] for d in docs.values() if d["loss"] is not None]
        baseline = float(np.median(scored)) if scored else 0.0
    for doc in docs.values():
        doc["suspicion"] = None if doc["loss"] is None else doc["loss"] - baseline
    table = pa.Table.from_pylist(list(docs.values()), schema=SCHEMA)
    return table.replace_schema_metadata({"reference_loss": repr(baseline)})
