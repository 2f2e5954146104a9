"""Shared test helpers (moved from test_packing.py); tests import these, never each other."""

from __future__ import annotations

import random
from pathlib import Path

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.mixture import CurriculumStage, MixtureConfig, build_mixture
from pretrain.packing import (
    BatchPlan,
    PackingConfig,
    pack_tokens,
)
from pretrain.tokenizer import TokenizerConfig, train_tokenizer

WORDS = "loss spikes happen when a bad batch meets a high learning rate".split()


SEQ_LEN = 64


CONFIG = PackingConfig(seq_len=SEQ_LEN, seed=7, batch_size=50)


def _corpus() -> list[dict]:
    rng = random.Random(0)
    docs = []
    for source, count in (("web", 240), ("code", 120), ("cjk", 60)):
        for n in range(count):
            if source == "code":
                text = f"def f{n}(x):\n    return x * {n}\n"
            elif source == "cjk":
                text = "".join(
                    rng.choice("数据模型训练语言文本") for _ in range(rng.randint(5, 40))
                )
            else:
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60)))
            docs.append(
                {
                    "id": doc_id(text, source),
                    "text": text,
                    "source": source,
                    "source_id": f"{source}:{n}",
                }  # fmt: skip
            )
    return docs


def build_packed_mix(tmp: Path) -> tuple[Path, object]:
    """Mixture (web/code/cjk) → tokenizer → packed tokens under ``tmp``; (tmp, PackingStats)."""
    shard = str(tmp / "docs.parquet")
    storage.write_table(documents_table(_corpus()), shard)
    weights = {"web": 0.5, "code": 0.3, "cjk": 0.2}
    build_mixture([shard], str(tmp / "mix"), MixtureConfig(weights=weights, val_fraction=0.2))
    train_tokenizer(
        str(tmp / "mix" / "train.parquet"), str(tmp / "tok"), TokenizerConfig(vocab_size=350)
    )
    stats = pack_tokens(str(tmp / "mix"), str(tmp / "tok"), str(tmp / "out"), CONFIG)
    return tmp, stats


STAGES_SEQ_LEN = 32


STAGES_CONFIG = PackingConfig(seq_len=STAGES_SEQ_LEN, seed=3, batch_size=40)


STAGES_PLAN = BatchPlan(global_batch=8, micro_batch=2, world_size=2, seed=5)


def _stages_corpus() -> list[dict]:
    rng = random.Random(1)
    words = {"web": "the cat sat on a mat and ran".split(), "books": "call me ishmael some years ago never mind how long".split()}  # fmt: skip
    return [
        {
            "id": doc_id(f"{s}{n}", s),
            "text": " ".join(rng.choice(w) for _ in range(rng.randint(5, 40))),
            "source": s,
        }  # fmt: skip
        for s, w in words.items()
        for n in range(150)
    ]


def build_packed_stages(tmp: Path) -> tuple[Path, object]:
    """A two-stage curriculum mixture (web/books) packed at seq 32; (tmp, PackingStats)."""
    shard = str(tmp / "docs.parquet")
    storage.write_table(documents_table(_stages_corpus()), shard)
    stages = (
        CurriculumStage(name="main", fraction=0.7),
        CurriculumStage(name="anneal", fraction=0.3, weights={"web": 0.1, "books": 0.9}),
    )
    config = MixtureConfig(weights={"web": 0.7, "books": 0.3}, val_fraction=0.1, stages=stages)
    build_mixture([shard], str(tmp / "mix"), config)
    train_tokenizer(
        str(tmp / "mix" / "train.parquet"), str(tmp / "tok"), TokenizerConfig(vocab_size=300)
    )
    stats = pack_tokens(str(tmp / "mix"), str(tmp / "tok"), str(tmp / "out"), STAGES_CONFIG)
    return tmp, stats
