"""Unit tests for pretrain.mixture: deterministic disjoint split, weights, upsampling caps."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.errors import ConfigError, DataError
from pretrain.mixture import MixtureConfig, build_mixture, documents_per_source, is_val

WORDS = ["data", "model", "token", "loss", "step", "batch", "layer", "grad", "the", "a", "of"]


def make_docs(source: str, count: int, words_per_doc: int, seed: int = 0) -> list[dict]:
    rng = random.Random(f"{source}-{seed}")
    docs = []
    for n in range(count):
        text = f"{source} {n} " + " ".join(rng.choice(WORDS) for _ in range(words_per_doc))
        docs.append({"id": doc_id(text, source), "text": text, "source": source})
    return docs


def write_shards(tmp: Path, docs: list[dict], num_shards: int = 2) -> list[str]:
    uris = []
    for shard in range(num_shards):
        uri = str(tmp / f"s{shard}" / "documents.parquet")
        storage.write_table(documents_table(docs[shard::num_shards]), uri)
        uris.append(uri)
    return uris


def read_split(out: Path, name: str) -> list[dict]:
    return storage.read_table(str(out / f"{name}.parquet")).to_pylist()


@pytest.fixture
def corpus() -> list[dict]:
    return make_docs("web", 300, 40) + make_docs("code", 120, 30) + make_docs("tiny", 6, 20)


def test_split_is_deterministic_disjoint_and_order_independent(tmp_path, corpus):
    config = MixtureConfig(weights=None, val_fraction=0.1, seed=3)
    build_mixture(write_shards(tmp_path / "a", corpus), str(tmp_path / "out_a"), config)
    shuffled = corpus[::-1]
    random.Random(1).shuffle(shuffled)
    build_mixture(write_shards(tmp_path / "b", shuffled, 3), str(tmp_path / "out_b"), config)

    for name in ("train.parquet", "val.parquet", "mixture.json"):
        assert (tmp_path / "out_a" / name).read_bytes() == (tmp_path / "out_b" / name).read_bytes()
    train_ids = {r["id"] for r in read_split(tmp_path / "out_a", "train")}
    val_ids = {r["id"] for r in read_split(tmp_path / "out_a", "val")}
    assert not train_ids & val_ids
    # natural weights, no budget: every non-val document is used exactly once
    assert train_ids | val_ids == {d["id"] for d in corpus}
    by_rule = {d["id"] for d in corpus if d["source"] != "tiny" and is_val(d["id"], 3, 0.1)}
    assert {i for i in val_ids if not i.startswith("tiny")} >= by_rule
    assert 20 <= len(val_ids) <= 70


def test_documents_per_source_counts_every_shard(tmp_path, corpus):
    assert documents_per_source(write_shards(tmp_path, corpus, 3)) == {
        "code": 120, "tiny": 6, "web": 300
    }  # fmt: skip
    assert documents_per_source([]) == {}


def test_adding_documents_never_moves_existing_ones(tmp_path, corpus):
    config = MixtureConfig(val_fraction=0.2, seed=0)
    subset = [d for d in corpus if d["source"] == "web"][:150]
    build_mixture(write_shards(tmp_path / "a", subset), str(tmp_path / "small"), config)
    build_mixture(write_shards(tmp_path / "b", corpus), str(tmp_path / "big"), config)
    small_val = {r["id"] for r in read_split(tmp_path / "small", "val")}
    big_val = {r["id"] for r in read_split(tmp_path / "big", "val")}
    assert small_val == big_val & {d["id"] for d in subset}
    assert small_val == {d["id"] for d in subset if is_val(d["id"], 0, 0.2)}


def test_realized_weights_close_to_target(tmp_path, corpus):
    weights = {"web": 0.5, "code": 0.4, "tiny": 0.1}
    config = MixtureConfig(
        weights=weights, val_fraction=0.05, max_epochs={"tiny": 50.0}, decontam=None
    )
    stats = build_mixture(write_shards(tmp_path, corpus), str(tmp_path / "out"), config)
    train = read_split(tmp_path / "out", "train")
    chars = Counter()
    for row in train:
        chars[row["source"]] += len(row["text"])
    total = sum(chars.values())
    for source, weight in weights.items():
        assert chars[source] / total == pytest.approx(weight, abs=0.02)
        assert stats.sources[source].realized_share == pytest.approx(weight, abs=0.02)
        assert stats.sources[source].target_share == pytest.approx(weight)
    assert stats.train_chars == total
    assert stats.sources["code"].epochs > 1.0  # code is upsampled, web downsampled
    assert stats.sources["web"].epochs < 1.0
    assert not stats.warnings


def test_small_source_upsampled_to_cap_with_warning(tmp_path, corpus):
    config = MixtureConfig(
        weights={"web": 0.5, "code": 0.3, "tiny": 0.2},
        max_epochs={"tiny": 2.0},
        seed=1,
        decontam=None,
    )
    stats = build_mixture(write_shards(tmp_path, corpus), str(tmp_path / "out"), config)
    tiny_train = [r for r in read_split(tmp_path / "out", "train") if r["source"] == "tiny"]
    per_doc = Counter(r["id"] for r in tiny_train)
    assert stats.sources["tiny"].epochs == 2.0
    assert set(per_doc.values()) == {2}
    assert sorted({r["epoch"] for r in tiny_train}) == [0, 1]
    assert len(per_doc) == stats.sources["tiny"].available_train_docs
    assert len(stats.warnings) == 1 and "'tiny' is too small" in stats.warnings[0]
    mixture = storage.read_json(str(tmp_path / "out" / "mixture.json"))
    assert mixture["warnings"] == list(stats.warnings)
    assert mixture["sources"]["tiny"]["realized_share"] < 0.2


def test_token_budget_and_min_val_docs(tmp_path):
    docs = make_docs("web", 200, 40) + make_docs("pair", 2, 10) + make_docs("solo", 1, 10)
    config = MixtureConfig(val_fraction=0.0, min_val_docs=1, token_budget_chars=5_000)
    stats = build_mixture(write_shards(tmp_path, docs), str(tmp_path / "out"), config)
    assert stats.sources["pair"].val_docs == 1 and stats.sources["pair"].train_docs >= 1
    assert stats.sources["solo"].val_docs == 0
    assert stats.sources["web"].val_docs == 1
    largest_doc = max(len(d["text"]) for d in docs)
    assert 5_000 <= stats.train_chars < 5_000 + 3 * largest_doc


@pytest.mark.parametrize(
    "kwargs",
    [
        {"weights": {"web": -1.0}},
        {"weights": {}},
        {"val_fraction": 1.0},
        {"max_epochs": {"web": 0.5}},
        {"token_budget_chars": 0},
    ],
)
def test_bad_config_raises(kwargs):
    with pytest.raises(ConfigError):
        MixtureConfig(**kwargs)


def test_weights_must_match_sources_and_ids_be_unique(tmp_path, corpus):
    uris = write_shards(tmp_path, corpus)
    with pytest.raises(DataError, match="sources without a weight"):
        build_mixture(uris, str(tmp_path / "out"), MixtureConfig(weights={"web": 1.0}))
    dup_uri = str(tmp_path / "dup" / "documents.parquet")
    storage.write_table(documents_table(corpus[:3]), dup_uri)
    with pytest.raises(DataError, match="duplicate ids"):
        build_mixture([*uris, dup_uri], str(tmp_path / "out"), MixtureConfig())
