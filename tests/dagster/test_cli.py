"""The ``pretrain`` command line, as a user runs it."""

import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main


def test_help_lists_the_commands() -> None:
    pretrain = Path(sys.executable).with_name("pretrain")
    out = subprocess.run(
        [str(pretrain), "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("plan", "demo", "status", "export", "evals"):
        assert command in out


def test_plan_for_llama2_7b(capsys) -> None:
    assert (
        main(["plan", "--params", "6.74e9", "--tokens", "2e12", "--gpu", "a100", "--mfu", "0.4"])
        == 0
    )
    out = capsys.readouterr().out
    assert "8.09e+22 FLOPs" in out and "180,021 A100-hours" in out and "llama_7b" in out


def test_plan_for_a_budget_prints_both_plans(capsys) -> None:
    assert main(["plan", "--gpu", "h100", "--gpus", "256", "--days", "14"]) == 0
    out = capsys.readouterr().out
    assert "| chinchilla |" in out and "| overtrained |" in out


def test_status_without_runs(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert main(["status", "--root", str(tmp_path)]) == 0
    assert "no training runs" in capsys.readouterr().out


def test_evals_fetch_offline_prints_one_line_and_fails(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert main(["evals", "fetch", "--dir", str(tmp_path / "evals")]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "Hugging Face Hub is unreachable" in out
    assert str(tmp_path / "evals") in out


def test_demo_summary_names_the_tasks_not_scored() -> None:
    from app.summary import _skipped

    assert _skipped('["hellaswag", "arc_easy"]') == ["arc_easy", "hellaswag"]
    assert _skipped(["blimp"]) == ["blimp"] and _skipped(None) == []


def test_demo_takes_its_own_options(capsys) -> None:
    """``pretrain demo --steps 300`` (the README's) reaches the demo's parser: its options,
    ``--help`` included, are the demo's own, not the ``pretrain`` wrapper's."""
    with pytest.raises(SystemExit) as done:
        main(["demo", "--steps", "300", "--filter.urls", "null", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "--train.optim.lr" in out and "--search-candidates" in out
    with pytest.raises(SystemExit) as refused:
        main(["plan", "--steps", "300"])  # every other command still refuses what it lacks
    assert (
        refused.value.code == 2 and "unrecognized arguments: --steps 300" in capsys.readouterr().err
    )
