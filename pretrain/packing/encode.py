"""Batch encoding, in this process or over several worker processes, in input order.

    from pretrain.packing.encode import encode_batches
    for meta, flat, lengths in encode_batches(batches, tokenizer_json, eos_id, dtype, workers=4):
        ...   # flat: every document's ids + EOS, concatenated; lengths: per-document counts

``batches`` yields ``(meta, texts)``; ``meta`` is passed through untouched (it never crosses a
process boundary). Results come back in input order whatever the number of workers, so the
packed output is byte-identical for 1 or N workers. Workers are spawned (never forked: the
parent may hold threads — Dagster, ``tokenizers``' own pool) and each encodes on one thread.
At most ``2 * workers`` batches are in flight, so memory is bounded by the batch size.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from tokenizers import Tokenizer

_WORKER_TOKENIZER: Tokenizer | None = None


def encode_texts(
    tok: Tokenizer, texts: list[str], eos_id: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """Ids of every text followed by EOS, concatenated; and the per-text token counts."""
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    lengths = np.fromiter((len(e.ids) + 1 for e in encodings), np.int64, len(texts))
    flat = np.empty(int(lengths.sum()), dtype=dtype)
    ends = np.cumsum(lengths)
    for enc, end in zip(encodings, ends, strict=True):
        flat[end - len(enc.ids) - 1 : end - 1] = enc.ids
        flat[end - 1] = eos_id
    return flat, lengths


def _init_worker(tokenizer_json: str) -> None:
    global _WORKER_TOKENIZER
    # An ignored signal disposition survives exec: a parent started in the background (or one
    # that ignores SIGTERM) would hand workers that Pool.terminate() can never stop.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.environ["RAYON_NUM_THREADS"] = "1"  # one thread per process: N processes = N cores
    _WORKER_TOKENIZER = Tokenizer.from_str(tokenizer_json)


def _encode_in_worker(texts: list[str], eos_id: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    assert _WORKER_TOKENIZER is not None, "worker started without _init_worker"
    return encode_texts(_WORKER_TOKENIZER, texts, eos_id, np.dtype(dtype))


def encode_batches(
    batches: Iterable[tuple[Any, list[str]]],
    tokenizer_json: str,
    eos_id: int,
    dtype: np.dtype,
    workers: int = 1,
) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
    """Yield ``(meta, flat_ids, lengths)`` per input batch, in input order."""
    if workers == 1:
        tok = Tokenizer.from_str(tokenizer_json)
        for meta, texts in batches:
            yield (meta, *encode_texts(tok, texts, eos_id, dtype))
        return
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers, initializer=_init_worker, initargs=(tokenizer_json,)) as pool:
        pending: deque = deque()
        for meta, texts in batches:
            pending.append((meta, pool.apply_async(_encode_in_worker, (texts, eos_id, dtype.str))))
            if len(pending) >= 2 * workers:
                meta_done, result = pending.popleft()
                yield (meta_done, *result.get())
        while pending:
            meta_done, result = pending.popleft()
            yield (meta_done, *result.get())
        pool.close()  # let the workers exit on their own; __exit__ only terminates leftovers
        pool.join()
