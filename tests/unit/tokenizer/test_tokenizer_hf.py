"""Tokenizer: CJK share of the sample, per-language fertility, Hugging Face loading."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.tokenizer import TokenizerConfig, is_cjk, load_tokenizer, train_tokenizer
from tests.helpers.corpora import write_train


def _with_languages(tmp, counts) -> str:
    uri = write_train(tmp, counts)
    table = storage.read_table(uri)
    langs = ["zh" if s == "cjk" else "en" for s in table.column("source").to_pylist()]
    storage.write_table(table.append_column("language", pa.array(langs)), uri)
    return uri


@pytest.mark.parametrize("share", [0.1, 0.5])
def test_cjk_share_of_the_sample_is_configurable(tmp_path, share):
    uri = _with_languages(tmp_path, {"web": 200, "cjk": 200})
    config = TokenizerConfig(vocab_size=300, sample_chars=12_000, cjk_share=share)
    stats = train_tokenizer(uri, str(tmp_path / "out"), config)
    assert stats.sample_cjk_share == pytest.approx(share, abs=0.02)
    assert set(stats.languages) == {"en", "zh"}
    assert stats.languages["zh"].tokens_per_char > stats.languages["en"].tokens_per_char
    assert "| language: zh |" in stats.as_metadata()["fertility_md"]


def test_loads_in_transformers_with_special_tokens(tmp_path):
    import transformers  # a dev dependency: this test must run, not skip

    uri = _with_languages(tmp_path, {"web": 100, "code": 50, "cjk": 50})
    train_tokenizer(uri, str(tmp_path / "tok"), TokenizerConfig(vocab_size=320))
    ours = load_tokenizer(str(tmp_path / "tok"))
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path / "tok"))
    by_file = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(tmp_path / "tok" / "tokenizer.json")
    )
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (0, 1, 2)
    text = "def f(x):\n    return 数据 + 'ß'  # 🚀"
    ids = ours.encode(text, add_special_tokens=False).ids
    assert hf.encode(text, add_special_tokens=False) == ids == by_file.encode(text)
    assert hf.decode(ids) == text
    assert len(hf) == 320


def test_script_detection_and_bad_share():
    assert is_cjk("数据模型 training") and not is_cjk("plain English text, 数")
    with pytest.raises(ConfigError, match="cjk_share"):
        TokenizerConfig(cjk_share=1.0)
