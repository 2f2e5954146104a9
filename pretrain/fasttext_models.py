"""Train, save and load the fastText supervised models of the pipeline (quality, toxicity).

One place for what both classifiers do the same way: the training file, deterministic
training (one thread, a fixed seed), and ``model.bin`` written to or read from any URI
(local or ``s3://``; fastText itself only reads and writes local files)::

    model = train_supervised(["__label__a some words", ...], "s3://b/m/model.bin",
                             epoch=5, lr=0.5, dim=16, word_ngrams=2, seed=0)
    model = load_supervised("s3://b/m/model.bin")
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pretrain import storage
from pretrain.errors import ConfigError

# fastText with thread=1 initializes only the first tenth of its input matrix (its uniform
# init splits the matrix into ten blocks, one per thread, and runs block 0 alone); the rest
# starts as whatever the allocator hands back: zeros from fresh pages, but leftovers, at times
# NaN, in a process that has run much else (CI saw "Encountered NaN" at once, and retrain bytes
# differ with a small bucket). Training therefore runs with glibc's malloc perturb byte set so
# that every allocation is zero-filled, as fresh pages are: the same bytes in any process.
M_PERTURB = -6  # glibc mallopt parameter (malloc.h)
ZERO_FILL = 0xFF  # malloc fills new memory with perturb ^ 0xff


@contextmanager
def zero_filled_allocations() -> Iterator[None]:
    """Every ``malloc`` inside returns zeroed memory (glibc; elsewhere a no-op)."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except OSError:  # not glibc
        yield
        return
    mallopt(M_PERTURB, ZERO_FILL)
    try:
        yield
    finally:  # back to what the process started with (glibc reads MALLOC_PERTURB_ at start)
        mallopt(M_PERTURB, int(os.environ.get("MALLOC_PERTURB_", "0") or 0))


def train_supervised(
    lines: Iterable[str],
    model_uri: str,
    *,
    epoch: int,
    lr: float,
    dim: int,
    word_ngrams: int,
    seed: int,
    bucket: int | None = None,
) -> Any:
    """Train on ``lines`` (``__label__x tokens``), save to ``model_uri``, return the model."""
    import fasttext  # heavy native import, kept lazy

    extra = {} if bucket is None else {"bucket": bucket}
    with tempfile.TemporaryDirectory() as tmp:
        train_path = os.path.join(tmp, "train.txt")
        with open(train_path, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        try:
            with zero_filled_allocations():
                model = fasttext.train_supervised(
                    input=train_path, epoch=epoch, lr=lr, dim=dim, wordNgrams=word_ngrams,
                    minCount=1, thread=1, seed=seed, verbose=0, **extra,
                )  # fmt: skip
        except RuntimeError as exc:
            if "NaN" not in str(exc):
                raise
            raise ConfigError(
                f"fastText training diverged (NaN) at lr={lr}, bucket={bucket or 'default'}: "
                "lower lr, or raise bucket (fewer word pairs share a slot)"
            ) from exc
        model_path = os.path.join(tmp, "model.bin")
        model.save_model(model_path)
        with open(model_path, "rb") as f:
            storage.write_bytes(f.read(), model_uri)
    return model


def load_supervised(model_uri: str) -> Any:
    """The fastText model saved at ``model_uri``."""
    import fasttext

    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(storage.read_bytes(model_uri))
        f.flush()
        return fasttext.load_model(f.name)
