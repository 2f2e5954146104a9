"""Mixture: quality-weighted sampling, token budget, curriculum stages, share table, recipes."""

from __future__ import annotations

import random

import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.errors import ConfigError
from pretrain.mixture import (
    LLAMA2_LIKE_WEIGHTS,
    CurriculumStage,
    MixtureConfig,
    build_mixture,
    llama2_like_mixture,
)


def _docs(source: str, count: int, quality=lambda n: None, words: int = 30) -> list[dict]:
    rng = random.Random(source)
    out = []
    for n in range(count):
        text = f"{source} {n} " + " ".join(rng.choice("abcdefgh") * 3 for _ in range(words))
        out.append({"id": doc_id(text, source), "text": text, "source": source,
                    "quality_score": quality(n), "language": "en"})  # fmt: skip
    return out


def _build(tmp, docs, **kwargs):
    uri = str(tmp / "docs.parquet")
    storage.write_table(documents_table(docs), uri)
    stats = build_mixture([uri], str(tmp / "out"), MixtureConfig(val_fraction=0.0, **kwargs))
    return stats, storage.read_table(str(tmp / "out" / "train.parquet")).to_pylist()


@pytest.mark.parametrize(("alpha", "low", "high"), [(0.0, 0.8, 1.25), (1.0, 2.8, 6.0)])
def test_quality_alpha_sets_inclusion_odds(tmp_path, alpha, low, high):
    # half the documents have quality 1.0, half 0.25: with 10 % sampled, inclusion odds
    # approach the weight ratio (1 / 0.25) ** alpha
    docs = _docs("web", 2000, quality=lambda n: 1.0 if n % 2 else 0.25)
    budget = sum(len(d["text"]) for d in docs) // 10
    stats, train = _build(tmp_path, docs, token_budget_chars=budget, quality_alpha=alpha)
    quality = {d["id"]: d["quality_score"] for d in docs}
    good = sum(quality[r["id"]] == 1.0 for r in train)
    ratio = good / (len(train) - good)
    assert low < ratio < high, ratio
    mix = stats.sources["web"]
    assert mix.mean_quality_available == pytest.approx(0.625, abs=0.001)  # 1 doc in val
    assert (mix.mean_quality_train > 0.7) == (alpha > 0)


def test_token_budget_caps_web_at_one_epoch_and_reports_too_small(tmp_path):
    docs = _docs("web", 100) + _docs("code", 50)
    chars = {s: sum(len(d["text"]) for d in docs if d["source"] == s) for s in ("web", "code")}
    budget_tokens = chars["web"] // 2  # 4 chars/token -> 2x web's characters wanted in total
    weights = {"web": 0.9, "code": 0.1}
    stats, train = _build(
        tmp_path, docs, weights=weights, token_budget=budget_tokens, decontam=None
    )
    assert stats.budget_chars == budget_tokens * 4
    web = stats.sources["web"]
    assert (
        web.epoch_cap == 1.0
        and web.epochs == 1.0
        and web.needed_epochs == pytest.approx(1.8, rel=0.02)
    )
    assert stats.too_small == ("web",) and "'web' is too small" in stats.warnings[0]
    code = stats.sources["code"]
    assert code.epochs == pytest.approx(0.2 * chars["web"] / chars["code"], abs=0.05)
    assert {r["epoch"] for r in train if r["source"] == "web"} == {0}
    table = stats.share_table_md()
    assert "| web ⚠ too small | 90.0% |" in table and "│" in table and "█" in table
    assert stats.as_metadata()["share_table_md"] == table


def test_curriculum_stages_have_their_own_shares_and_never_repeat_early(tmp_path):
    docs = _docs("web", 200) + _docs("books", 200)
    total = sum(len(d["text"]) for d in docs)
    stages = (
        CurriculumStage(name="main", fraction=0.8, weights={"web": 0.9, "books": 0.1}),
        CurriculumStage(name="anneal", fraction=0.2, weights={"web": 0.2, "books": 0.8}),
    )
    stats, train = _build(tmp_path, docs, token_budget_chars=total // 2, stages=stages)
    assert [r["stage"] for r in train] == sorted(r["stage"] for r in train)  # stage-major
    for k, (stage, want) in enumerate(zip(stats.stages, (0.9, 0.2), strict=True)):
        rows = [r for r in train if r["stage"] == k]
        web = sum(len(r["text"]) for r in rows if r["source"] == "web") / sum(
            len(r["text"]) for r in rows
        )
        assert stage.realized_shares["web"] == pytest.approx(web, abs=1e-5)
        assert web == pytest.approx(want, abs=0.03)
    assert stats.sources["web"].target_share == pytest.approx(0.8 * 0.9 + 0.2 * 0.2)
    pairs = [(r["id"], r["epoch"]) for r in train]
    assert len(pairs) == len(set(pairs))  # stages continue each source's stream
    assert {r["epoch"] for r in train} == {0}  # nobody repeats before the source is used up
    assert "| anneal | 20% |" in stats.share_table_md()


def test_rerun_is_byte_identical(tmp_path):
    docs = _docs("web", 80, quality=lambda n: n / 80) + _docs("code", 20)
    kwargs = {"weights": {"web": 0.5, "code": 0.5}, "quality_alpha": 2.0, "token_budget": 2000}
    _build(tmp_path / "a", docs, **kwargs)
    _build(tmp_path / "b", docs, **kwargs)
    for name in ("train.parquet", "val.parquet", "mixture.json"):
        assert (tmp_path / "a" / "out" / name).read_bytes() == (
            tmp_path / "b" / "out" / name
        ).read_bytes()


def test_llama2_like_recipe():
    config = llama2_like_mixture(token_budget=1_000_000)
    assert config.weights == LLAMA2_LIKE_WEIGHTS and sum(config.weights.values()) == 1.0
    assert config.epoch_cap("web") == 1.0 and config.epoch_cap("books") == 4.0
    assert config.budget_chars() == 4_000_000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"quality_alpha": -1.0},
        {"token_budget": 10, "token_budget_chars": 10},
        {"chars_per_token": 0.0},
        {"stages": (CurriculumStage(name="a", fraction=0.5),)},
        {"stages": (CurriculumStage(name="a", fraction=0.5),) * 2},
    ],
)
def test_bad_config_says_how_to_fix(kwargs):
    with pytest.raises(ConfigError):
        MixtureConfig(**kwargs)
    with pytest.raises(ConfigError, match="fraction"):
        CurriculumStage(name="x", fraction=0.0)


def test_a_source_whose_every_document_hashes_into_validation_keeps_one_to_train() -> None:
    """Two whole books whose ids both fall under the validation cut (found, not planted: the
    first such pair of ids) once left their source with nothing to train on."""
    from pretrain.hashset import HASH_BUCKETS, hash_score
    from pretrain.mixture.sampling import split_source

    config = MixtureConfig()
    cut = round(config.val_fraction * HASH_BUCKETS)
    under = [i for i in (f"book-{n}" for n in range(2000)) if hash_score(config.seed, i) < cut]
    books = under[:2]
    val, train = split_source(books, config)
    assert len(train) == 1 and len(val) == 1 and set(train) | val == set(books)
    val, train = split_source(under[:5], config)  # five, all under the cut: one trains
    assert len(train) == 1 and len(val) == 4
    assert split_source(books[:1], config) == ({books[0]}, [])  # one document: validation only
