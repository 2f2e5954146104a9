"""Train, save and load the fastText supervised models of the pipeline (quality, toxicity).

One place for what both classifiers do the same way: the training file, deterministic
training (one thread, a fixed seed), and ``model.bin`` written to or read from any URI
(local or ``s3://``; fastText itself only reads and writes local files)::

    model = train_supervised(["__label__a some words", ...], "s3://b/m/model.bin",
                             epoch=5, lr=0.5, dim=16, word_ngrams=2, seed=0)
    model = load_supervised("s3://b/m/model.bin")
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import Any

from pretrain import storage
from pretrain.errors import ConfigError

# fastText (fasttext-numpy2 0.10.4) raises "Encountered NaN" now and then on input that trains when run again
# (seen in CI on the toxicity-classifier test, and by scripts/train_toxicity_model.py); a real
# divergence (lr too high) fails every attempt and becomes the ConfigError below.
NAN_ATTEMPTS = 3


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
        for attempt in range(NAN_ATTEMPTS):
            try:
                model = fasttext.train_supervised(
                    input=train_path, epoch=epoch, lr=lr, dim=dim, wordNgrams=word_ngrams,
                    minCount=1, thread=1, seed=seed, verbose=0, **extra,
                )  # fmt: skip
                break
            except RuntimeError as exc:
                if "NaN" not in str(exc):
                    raise
                if attempt + 1 < NAN_ATTEMPTS:
                    continue  # fastText at times stops at once on input that trains when rerun
                raise ConfigError(
                    f"fastText training diverged (NaN) {NAN_ATTEMPTS} times at lr={lr}, "
                    f"bucket={bucket or 'default'}: lower lr, or raise bucket (fewer word pairs "
                    "share a slot)"
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
