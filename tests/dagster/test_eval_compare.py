"""Cross-checkpoint comparison (library) and the ``eval_comparison`` / ``hf_export`` assets.

The library test writes report.json files by hand (the format ``evaluate_checkpoint`` writes);
the asset tests materialize through Dagster with a real ``ArtifactStore`` in a temp dir.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from dagster import AssetMaterialization, DagsterInstance, materialize

from pretrain import identity
from pretrain.errors import DataError
from pretrain.eval import compare_reports
from pretrain_assets.eval import eval_comparison
from pretrain_assets.export import hf_export
from resources.storage import ArtifactStore
from tests.helpers.eval_models import (
    save_random_checkpoint,
    tiny_model_config,
    train_tiny_tokenizer,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_report(root: Path, branch: str, step: int, loss: float, acc: float | None) -> Path:
    key = f"{branch}-s{step:09d}"
    tasks = {"blimp": {"status": "skipped", "reason": "absent"}}
    if acc is not None:
        tasks = {"blimp": {"status": "ok", "acc": acc, "acc_norm": acc, "chance": 0.5}}
    report = {
        "checkpoint_key": key, "branch": branch, "step": step, "tokens_seen": step * 1000,
        "overall": {"loss": loss, "bits_per_byte": loss / 2},
        "per_source": [{"source": "code", "loss": loss - 0.5}, {"source": "prose", "loss": loss + 0.5}],
        "tasks": tasks,
    }  # fmt: skip
    (root / key).mkdir(parents=True)
    (root / key / "report.json").write_text(json.dumps(report))
    return root / key


def test_comparison_rows_charts_and_markdown(tmp_path: Path) -> None:
    reports = tmp_path / "eval_reports"
    dirs = [
        write_report(reports, "b00", 300, 4.0, 0.55),
        write_report(reports, "b00", 150, 5.0, 0.50),
        write_report(reports, "b01", 200, 4.5, None),
    ]
    out = tmp_path / "cmp"
    result = compare_reports([str(d) for d in dirs], str(out))

    assert [(r["branch"], r["step"]) for r in result.rows] == [
        ("b00", 150),
        ("b00", 300),
        ("b01", 200),
    ]
    assert result.rows[1]["loss/prose"] == 4.5 and result.rows[1]["acc/blimp"] == 0.55
    assert "acc/blimp" not in result.rows[2]  # a skipped task is not plotted as 0
    assert sorted(result.charts) == ["task_accuracy", "val_loss"]
    for name, uri in result.charts.items():
        blob = Path(uri).read_bytes()
        assert blob.startswith(PNG_MAGIC) and blob == result.png[name]
        assert f"data:image/png;base64,{base64.b64encode(blob).decode()}" in result.charts_md()
    table = (out / "comparison.md").read_text()
    assert "| b00-s000000300 | 300 | 300000 | 4.0000 | 2.0000 |" in table
    meta = result.as_metadata()
    assert meta["num_checkpoints"] == 3 and meta["latest_checkpoint"] == "b01-s000000200"

    again = compare_reports([str(d) for d in dirs[::-1]], str(tmp_path / "again"))
    assert again.png == result.png  # same reports, byte-identical charts


def test_no_reports_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="materialize eval_reports"):
        compare_reports([], str(tmp_path / "cmp"))
    with pytest.raises(DataError, match="evaluate that checkpoint"):
        compare_reports([str(tmp_path / "missing")], str(tmp_path / "cmp"))


def test_assets_materialize_through_dagster(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    folder, _ = train_tiny_tokenizer(root / "tokenizer")
    sha = hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()
    save_random_checkpoint(root / "runs", tiny_model_config(300), sha)  # runs/b00/step-00000001
    write_report(root / "eval_reports", "b00", 1, 5.5, 0.5)
    # made outside the pipeline: they get content identities, as imported outputs do
    identity.adopt(str(folder), "tokenizer")
    identity.adopt(str(root / "eval_reports" / "b00-s000000001"), "eval_reports")
    store = ArtifactStore(root=str(root))
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("checkpoints", ["b00-s000000001"])
    instance.report_runless_asset_event(
        AssetMaterialization("eval_reports", partition="b00-s000000001")
    )

    exported = materialize([hf_export], instance=instance, partition_key="b00-s000000001",
                           resources={"store": store})  # fmt: skip
    assert exported.success
    (mat,) = exported.asset_materializations_for_node("hf_export")
    assert (
        mat.metadata["step"].value == 1
        and (root / "hf_export" / "b00-s000000001" / "config.json").exists()
    )

    compared = materialize([eval_comparison], instance=instance, resources={"store": store})
    assert compared.success
    (mat,) = compared.asset_materializations_for_node("eval_comparison")
    assert mat.metadata["num_checkpoints"].value == 1
    assert "data:image/png;base64," in mat.metadata["charts_md"].value
    assert Path(mat.metadata["chart/val_loss"].value).read_bytes().startswith(PNG_MAGIC)
