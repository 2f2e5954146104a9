"""Evaluation tests: per-source loss/perplexity/bits-per-token from a real trained checkpoint."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from pretrain.distributed import ProcessInfo
from pretrain.errors import CheckpointError, DataError
from pretrain.eval import EvalConfig, evaluate_checkpoint
from pretrain.eval.evaluate import scored_rows
from pretrain.train.parallel import build_model
from tests.helpers.eval_data import VOCAB, make_config, make_packed, train_checkpoint
from tests.helpers.training import save_model

# every test reads a checkpoint trained here (30 steps) and scores it: the slow tier
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("eval")
    packed = make_packed(root / "packed")
    return packed, train_checkpoint(packed, root / "runs", max_steps=30)


def test_report_is_finite_and_per_source(trained: tuple[Path, Path], tmp_path: Path) -> None:
    packed, checkpoint = trained
    out = tmp_path / "eval_reports" / "b00-s000000030"
    config = EvalConfig(max_sequences_per_source=8, batch_size=3, task_dir="")
    stats = evaluate_checkpoint(str(checkpoint), str(packed), str(out), config)

    assert stats.checkpoint_key == "b00-s000000030" and stats.step == 30
    by_source = {s.source: s for s in stats.per_source}
    assert sorted(by_source) == ["code", "noise"]
    code, noise = by_source["code"], by_source["noise"]
    assert code.num_sequences == 8  # capped by max_sequences_per_source
    assert code.loss < 1.0 < math.log(VOCAB) * 0.9 < noise.loss  # learned vs unlearnable
    for s in (code, noise, stats.overall):
        assert math.isfinite(s.loss) and s.perplexity == pytest.approx(math.exp(s.loss))
        assert s.bits_per_token == pytest.approx(s.loss / math.log(2))
    total = code.num_tokens + noise.num_tokens
    assert stats.overall.num_tokens == total and stats.overall.num_sequences == 16
    assert stats.overall.loss == pytest.approx(
        (code.loss * code.num_tokens + noise.loss * noise.num_tokens) / total
    )

    report = json.loads((out / "report.json").read_text())
    assert report["overall"]["loss"] == stats.overall.loss
    assert report["lineage"]["tokenizer_sha256"] == "ab" * 32
    table = (out / "report.md").read_text()
    assert "| code | 8 |" in table and "| **overall** | 16 |" in table
    meta = stats.as_metadata()
    assert meta["val_loss"] == stats.overall.loss and meta["loss/noise"] == noise.loss

    again = tmp_path / "again"
    evaluate_checkpoint(str(checkpoint), str(packed), str(again), config)
    assert (again / "report.md").read_bytes().replace(b"again", b"") == (
        out / "report.md"
    ).read_bytes()


def test_non_finite_weights_raise(trained: tuple[Path, Path], tmp_path: Path) -> None:
    packed, _ = trained
    cfg = make_config(packed, tmp_path / "runs", max_steps=1)
    proc = ProcessInfo()
    model = build_model(cfg.model, proc, seed=0)
    with torch.no_grad():
        model.norm.weight.fill_(float("nan"))
    path = save_model(
        cfg, model, step=1, meta={"lineage": {"tokenizer_sha256": "ab" * 32}}, proc=proc
    )
    with pytest.raises(CheckpointError, match="non-finite"):
        evaluate_checkpoint(str(path), str(packed), str(tmp_path / "out"), EvalConfig(task_dir=""))
    assert not (tmp_path / "out" / "report.json").exists()


def test_tokenizer_mismatch_is_refused(trained: tuple[Path, Path], tmp_path: Path) -> None:
    _, checkpoint = trained
    other = make_packed(tmp_path / "other", tokenizer_sha256="cd" * 32)
    with pytest.raises(DataError, match="same tokenizer"):
        evaluate_checkpoint(
            str(checkpoint), str(other), str(tmp_path / "out"), EvalConfig(task_dir="")
        )


def test_a_capped_source_is_scored_evenly_over_its_sequences() -> None:
    # packing keeps a document's sequences together: the first N would be a few documents
    assert scored_rows(10, 4).tolist() == [0, 3, 6, 9]
    assert scored_rows(3, 8).tolist() == [0, 1, 2]  # fewer than the cap: all of them
    rows = scored_rows(236, 64)
    assert len(rows) == 64 == len(set(rows.tolist()))
    assert rows[0] == 0 and rows[-1] == 235 and (rows[1:] - rows[:-1]).max() <= 4
