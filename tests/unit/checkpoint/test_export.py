"""Consolidated export: one weights file + config, loadable without the checkpoint's topology."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pretrain.checkpoint import dcp as ckpt
from pretrain.errors import CheckpointError, ConfigError
from pretrain.train.export import export_checkpoint, load_export, main
from tests.helpers.training import VOCAB, make_config, make_packed, run


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    cfg = make_config(make_packed(root / "packed"), root / "runs", max_steps=4, every=4)
    return run(cfg).last_checkpoint


@pytest.mark.parametrize("fmt", ["safetensors", "torch"])
def test_export_round_trips_bit_for_bit(trained: Path, tmp_path: Path, fmt: str) -> None:
    weights = export_checkpoint(trained, tmp_path / "out", fmt=fmt)
    assert weights.name == {"safetensors": "model.safetensors", "torch": "model.pt"}[fmt]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        ["_COMMITTED", "config.json", "export.json", weights.name]
    )
    model = load_export(tmp_path / "out")
    assert model.output.weight is model.tok_embeddings.weight  # tied head stored once
    original = ckpt.load_consolidated_model(str(trained)).state_dict()
    assert all(torch.equal(v, original[k]) for k, v in model.state_dict().items())
    info = json.loads((tmp_path / "out" / "export.json").read_text())
    assert (info["step"], info["key"], info["format"]) == (4, "b00-s000000004", fmt)


def test_bf16_export_is_half_the_size_and_close(trained: Path, tmp_path: Path) -> None:
    full = export_checkpoint(trained, tmp_path / "fp32")
    assert main([str(trained), str(tmp_path / "bf16"), "--dtype", "bf16"]) == 0
    half = tmp_path / "bf16" / full.name
    assert half.stat().st_size < 0.55 * full.stat().st_size
    tokens = torch.randint(0, VOCAB, (2, 16))
    a, b = load_export(tmp_path / "fp32"), load_export(tmp_path / "bf16")
    assert torch.allclose(a(tokens), b(tokens), atol=0.05)


def test_export_refuses_bad_requests(trained: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dtype"):
        export_checkpoint(trained, tmp_path / "x", dtype="int8")
    with pytest.raises(CheckpointError, match="not a committed"):
        load_export(tmp_path / "missing")
