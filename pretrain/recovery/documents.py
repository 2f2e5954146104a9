"""What a skip window held: the documents and sources behind the steps a rollback skips.

The packing ledger maps train sequences to document pieces and the trainer's batch order is a pure
function of the data seed and the batch size (:mod:`pretrain.packing.ledger`), so the steps
``[start, end)`` of a skip window name their documents without reading any token::

    docs = window_documents("art/packed_tokens", BatchPlan(global_batch=16, micro_batch=4), (41, 43))
    docs.summary(max_ids=10)
    # {"steps": [41, 43], "num_sequences": 32, "num_documents": 30, "tokens": 1056,
    #  "sources": {"web": 24, "code": 6}, "doc_ids": ["doc-00012", ...], "doc_ids_shown": 10,
    #  "token_ranges": [[396, 429], ...], "token_ranges_shown": 10}

    decision = describe_skip(decision, "runs/b00/run-<dagster run id>.json")

:func:`describe_skip` reads the resolved trainer config the training op wrote for the running
Dagster run (packed dir, batch size, data seed) and attaches the summary to the decision, so run
tags (counts and the first ids) and asset metadata (more ids) name the skipped data. A packed
dir without ``ledger.parquet`` gives ``{"ledger": "missing", ...}`` rather than an error: the
rollback is still right, only its explanation is shorter. Torch-free; never imports dagster.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.packing.ledger import BatchPlan, trace_steps, window_token_ranges
from pretrain.recovery.policy import Decision

LEDGER = "ledger.parquet"


@dataclass(frozen=True, kw_only=True)
class WindowDocuments:
    """Every document piece read by the steps of one skip window (doc ids in first-read order)."""

    window: tuple[int, int]
    num_sequences: int
    tokens: int
    doc_ids: tuple[str, ...]
    sources: dict[str, int]  # source → documents
    token_ranges: tuple[tuple[int, int], ...]

    def summary(self, max_ids: int = 10) -> dict[str, Any]:
        """JSON-able, bounded: counts, every source, the first ``max_ids`` ids and ranges."""
        return {
            "steps": list(self.window),
            "num_sequences": self.num_sequences,
            "num_documents": len(self.doc_ids),
            "tokens": self.tokens,
            "sources": dict(self.sources),
            "doc_ids": list(self.doc_ids[:max_ids]),
            "doc_ids_shown": min(max_ids, len(self.doc_ids)),
            "token_ranges": [list(r) for r in self.token_ranges[:max_ids]],
            "token_ranges_shown": min(max_ids, len(self.token_ranges)),
        }


def window_documents(
    packed_dir: str, plan: BatchPlan, window: tuple[int, int]
) -> WindowDocuments | None:
    """The documents read by steps ``[window[0], window[1])``, or None when the packed dir has no
    ledger. Which sequences a step reads depends only on the data seed and the global batch."""
    start, end = window
    if not storage.exists(storage.join(packed_dir, LEDGER)):
        return None
    table = trace_steps(packed_dir, plan, list(range(start, end)))
    doc_ids = list(dict.fromkeys(table["doc_id"].to_pylist()))
    source_of = dict(zip(table["doc_id"].to_pylist(), table["source"].to_pylist(), strict=True))
    sources = Counter(str(source_of[d]) for d in doc_ids)
    return WindowDocuments(
        window=(start, end),
        num_sequences=len(set(table["seq_index"].to_pylist())),
        tokens=int(sum(table["tokens"].to_pylist())),
        doc_ids=tuple(str(d) for d in doc_ids),
        sources=dict(sorted(sources.items(), key=lambda kv: (-kv[1], kv[0]))),
        token_ranges=tuple(window_token_ranges(packed_dir, plan, start, end)),
    )


def plan_of(train_config: dict[str, Any]) -> BatchPlan:
    """The batch plan of a resolved trainer config (``TrainConfig.to_dict()``). The set of
    sequences a step reads does not depend on the world size, so one rank reading the whole
    global batch stands for any number of ranks."""
    data = train_config["data"]
    return BatchPlan(
        global_batch=int(data["global_batch_sequences"]),
        micro_batch=int(data["global_batch_sequences"]),
        world_size=1,
        seed=int(data.get("seed", 0)),
    )


def describe_skip(decision: Decision, config_path: str | Path, max_ids: int = 10) -> Decision:
    """``decision`` with ``documents`` set from the skip window and the run's trainer config.

    Decisions without a skip window are returned unchanged. The config file is the one the
    training op writes (``<run_root>/<branch>/run-<run id>.json``); when it is missing (a run not
    launched by the training op) the record says so — the rollback itself does not depend on it."""
    if decision.skip_window is None:
        return decision
    path = str(config_path)  # a local path or s3:// (an S3 run root)
    if not storage.exists(path):
        documents = {
            "steps": list(decision.skip_window),
            "unavailable": f"no trainer config {path}",
        }
        return dataclasses.replace(decision, documents=documents)
    config = json.loads(storage.read_bytes(path))
    if "data" not in config or "packed_dir" not in config["data"]:
        raise ConfigError(f"{path} is not a resolved trainer config (no data.packed_dir)")
    packed_dir = config["data"]["packed_dir"]
    found = window_documents(packed_dir, plan_of(config), decision.skip_window)
    documents = (
        found.summary(max_ids)
        if found is not None
        else {"steps": list(decision.skip_window), "ledger": "missing", "packed_dir": packed_dir}
    )
    return dataclasses.replace(decision, documents=documents)
