"""Unit tests for pretrain.tokenizer: exact round-trip, vocab size, special ids, determinism."""

from __future__ import annotations

import pytest

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.tokenizer import (
    TokenizerConfig,
    load_tokenizer,
    roundtrip_failures,
    special_ids,
    train_tokenizer,
)
from tests.helpers.corpora import write_train

CONFIG = TokenizerConfig(vocab_size=400, min_frequency=2, seed=0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tok")
    train_uri = write_train(tmp, {"web": 300, "code": 150, "cjk": 150})
    stats = train_tokenizer(train_uri, str(tmp / "out"), CONFIG)
    return tmp, train_uri, stats


def test_roundtrip_is_exact_for_unicode_and_whitespace(trained):
    tmp, _, stats = trained
    tok = load_tokenizer(str(tmp / "out"))
    texts = [
        "  leading spaces, trailing spaces   ",
        "tabs\tand\r\nCRLF\n\n\n  blank lines",
        "def f(x):\n    return {'a': [1, 2]}  # comment\n",
        "中文文本 mixed with English, 日本語も。",
        "emoji 🚀🔥 and combining é (e\u0301) and ZWJ 👩‍💻",
        "unseen bytes: \x00\x7f ÿ ß Ω ∑ 𝔘",
        "<|end_of_text|> literal special text stays text on decode",
        "",
    ]
    assert roundtrip_failures(tok, texts) == []
    assert stats.roundtrip_rate == 1.0
    assert stats.roundtrip_docs > 0


def test_vocab_size_and_special_ids(trained):
    tmp, _, stats = trained
    tok = load_tokenizer(str(tmp / "out" / "tokenizer.json"))
    assert tok.get_vocab_size() == CONFIG.vocab_size == stats.vocab_size
    assert special_ids(tok) == {"bos": 0, "eos": 1, "pad": 2} == stats.special_ids
    for token, expected in zip(CONFIG.special_tokens, (0, 1, 2), strict=True):
        assert tok.token_to_id(token) == expected
    # every byte is in the initial alphabet, so nothing is ever unknown
    assert len(tok.encode("\x00\x01").ids) == 2


def test_stats_report_fertility_per_source(trained):
    tmp, _, stats = trained
    assert set(stats.sources) == {"web", "code", "cjk"}
    assert stats.heldout_docs == sum(f.docs for f in stats.sources.values()) == 15 + 15 + 30
    web, cjk = stats.sources["web"], stats.sources["cjk"]
    assert web.bytes_per_token > 2.0  # repetitive English compresses well
    assert cjk.tokens_per_char > web.tokens_per_char
    on_disk = storage.read_json(str(tmp / "out" / "stats.json"))
    assert on_disk["sources"]["web"]["tokens"] == web.tokens
    meta = stats.as_metadata()
    assert meta["vocab_size"] == 400 and meta["roundtrip_rate"] == 1.0


def test_training_is_deterministic(trained):
    tmp, train_uri, _ = trained
    train_tokenizer(train_uri, str(tmp / "again"), CONFIG)
    for name in ("tokenizer.json", "stats.json"):
        assert (tmp / "out" / name).read_bytes() == (tmp / "again" / name).read_bytes()


def test_sample_keeps_source_shares(tmp_path):
    train_uri = write_train(tmp_path, {"web": 300, "cjk": 300})
    table = storage.read_table(train_uri).to_pylist()
    web_share = sum(len(r["text"]) for r in table if r["source"] == "web") / sum(
        len(r["text"]) for r in table
    )
    config = TokenizerConfig(vocab_size=300, sample_chars=20_000)
    stats = train_tokenizer(train_uri, str(tmp_path / "out"), config)
    by_source = stats.sample_chars_by_source
    assert 20_000 <= stats.sample_chars < 21_000
    assert by_source["web"] / stats.sample_chars == pytest.approx(web_share, abs=0.02)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"vocab_size": 100},
        {"min_frequency": 0},
        {"special_tokens": ("<a>", "<b>")},
        {"special_tokens": ("<a>", "<a>", "<b>")},
        {"sample_chars": 0},
    ],
)
def test_bad_config_raises(kwargs):
    with pytest.raises(ConfigError):
        TokenizerConfig(**kwargs)
