"""Hugging Face export: ``LlamaForCausalLM`` loads it and its logits match ours.

Checkpoints of small random models (GQA; tied and untied heads; norm gains perturbed so a
swapped norm would show) are exported, loaded with ``transformers`` and compared on the same
token ids; the tokenizer files load with ``AutoTokenizer`` and encode like ours.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from pretrain.checkpoint.dcp import load_consolidated_model
from pretrain.errors import ConfigError, DataError
from pretrain.hf_export import export_hf_llama
from tests.helpers.eval_models import (
    TEXT,
    save_random_checkpoint,
    tiny_model_config,
    train_tiny_tokenizer,
)

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder, _ = train_tiny_tokenizer(tmp_path_factory.mktemp("tok"))
    return folder, hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()


@pytest.mark.parametrize("tied", [True, False])
def test_llama_for_causal_lm_logits_match(
    tokenizer_dir: tuple[Path, str], tmp_path: Path, tied: bool
) -> None:
    folder, sha = tokenizer_dir
    cfg = tiny_model_config(300, tie_embeddings=tied, rope_theta=5000.0, norm_eps=1e-6)
    ckpt = save_random_checkpoint(tmp_path / "runs", cfg, sha, seed=5)
    out = tmp_path / "hf"
    summary = export_hf_llama(str(ckpt), str(folder), str(out))

    assert (out / "_COMMITTED").exists()
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json"} <= set(summary["files"])  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    assert config["tie_word_embeddings"] is tied and config["num_key_value_heads"] == 2
    hf = transformers.LlamaForCausalLM.from_pretrained(str(out)).eval()
    assert hf.config.rope_parameters["rope_theta"] == 5000.0
    assert summary["num_params"] == sum(p.numel() for p in hf.parameters())

    ours = load_consolidated_model(str(ckpt))
    ids = torch.randint(3, 300, (3, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected, actual = ours(ids), hf(ids).logits
    assert expected.abs().max() > 0.1  # not a degenerate comparison
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)

    hf_tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert (hf_tok.bos_token_id, hf_tok.eos_token_id, hf_tok.pad_token_id) == (0, 1, 2)
    from tokenizers import Tokenizer

    ours_tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert hf_tok(TEXT)["input_ids"] == ours_tok.encode(TEXT).ids


def test_qk_norm_is_refused(tokenizer_dir: tuple[Path, str], tmp_path: Path) -> None:
    folder, sha = tokenizer_dir
    ckpt = save_random_checkpoint(tmp_path / "runs", tiny_model_config(300, qk_norm=True), sha)
    with pytest.raises(ConfigError, match="qk_norm"):
        export_hf_llama(str(ckpt), str(folder), str(tmp_path / "hf"))
    assert not (tmp_path / "hf").exists()


def test_other_tokenizer_is_refused(tokenizer_dir: tuple[Path, str], tmp_path: Path) -> None:
    folder, _ = tokenizer_dir
    ckpt = save_random_checkpoint(tmp_path / "runs", tiny_model_config(300), "ab" * 32)
    with pytest.raises(DataError, match="tokenizer the run used"):
        export_hf_llama(str(ckpt), str(folder), str(tmp_path / "hf"))
