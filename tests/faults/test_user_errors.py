"""Every user error of the ``pretrain`` command: one line on stderr, no traceback, exit status 1,
and what to do (issue 26, §3).

The slow tests run the real ``pretrain`` command as a subprocess, as the user would, on real
files and a real Dagster instance (``$DAGSTER_HOME`` made as ``make home`` makes it; one runs
``pretrain data`` through the mixture). The fast ones call the functions those commands call,
on real folders and a real instance. Run::

    .venv/bin/pytest -q tests/faults/test_user_errors.py
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance, Failure

from app.demo import project_instance
from app.user_errors import report_user_errors
from foundation.shards import plan_sources, register_shards
from foundation.stages import check_settings
from pretrain.data.raw import build_raw_shard, require_documents
from pretrain.errors import ConfigError, DataError
from resources.storage import ArtifactStore
from tests.helpers.corpora import PLAIN_SENTENCES
from tests.helpers.shared_data import SHARED_EVAL

ROOT = Path(__file__).resolve().parents[2]

SENTENCES = PLAIN_SENTENCES[:10]


def write_docs(folder: Path, name: str, count: int, seed: int) -> list[str]:
    """``count`` distinct stories in ``folder/name``; returns their texts."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = []
    for i in range(count):
        order = [SENTENCES[(seed * 7 + i * 3 + k) % len(SENTENCES)] for k in range(8)]
        texts.append(f"Story {seed}-{i}. " + " ".join(order))
    (folder / name).write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return texts


def dagster_home(tmp_path: Path) -> Path:
    """A project instance folder as ``make home`` makes it."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "config" / "dagster.yaml", home / "dagster.yaml")
    return home


def pretrain(
    tmp_path: Path, *args: str, home: Path | None = None, timeout: int = 300, **env: str
) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("pretrain")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]
    environ = {**os.environ, "PRETRAIN_ROOT": str(tmp_path / "artifacts"), "PYTHONPATH": str(ROOT)}
    environ.pop("DAGSTER_HOME", None)
    if home is not None:
        environ["DAGSTER_HOME"] = str(home)
    environ.update(env)
    return subprocess.run(
        [*command, *args], cwd=tmp_path, env=environ, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def one_error_line(done: subprocess.CompletedProcess, command: str = "data") -> str:
    """The one line a user error prints; fails on a traceback, a second line or exit 0."""
    assert done.returncode == 1, (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
    assert "Traceback" not in done.stderr and "Stack Trace" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("  warning (")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"pretrain {command}: error: "), errors[0]
    return errors[0]


def test_sources_are_planned_and_refused_before_any_run(tmp_path: Path, monkeypatch) -> None:
    """What ``pretrain data`` does before its first job, on real folders and a real instance."""
    one, two = tmp_path / "one", tmp_path / "two"
    write_docs(one, "a.jsonl", 2, seed=1)
    write_docs(two, "b.jsonl", 2, seed=2)
    write_docs(two, "c.jsonl", 2, seed=3)
    manifests = plan_sources(
        [("web", str(one)), ("web", str(two)), ("web", str(two)), ("books", str(two))],
        max_shards=2,
    )
    keys = [m.key for m in manifests]
    assert keys == ["web-0000", "web-0001", "books-0000", "books-0001"]
    web = sorted(Path(f.uri).name for m in manifests[:2] for f in m.files)
    assert web == ["a.jsonl", "b.jsonl", "c.jsonl"]  # both folders, each file once
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no JSONL/Parquet/WARC/text files under"):
        plan_sources([("web", str(tmp_path / "empty"))])
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "a.jsonl").write_bytes(b"")
    with pytest.raises(DataError, match=r"is empty \(1 files of 0 bytes\)"):
        plan_sources([("web", str(tmp_path / "blank"))])
    with pytest.raises(ConfigError, match="'embedded' is the built-in corpus"):
        plan_sources([("embedded", str(one))])
    with DagsterInstance.ephemeral() as instance:
        store = ArtifactStore(root=str(tmp_path / "artifacts"))
        with pytest.raises(ConfigError, match=r"shard keys \['web-0000'\] planned twice"):
            register_shards(instance, store, [manifests[0], manifests[0]])
        assert register_shards(instance, store, manifests) == keys
    with pytest.raises(ConfigError, match="need 9 band partitions"):
        check_settings({"dedup": {"bands": 7, "rows": 16}})
    with pytest.raises(ConfigError, match="DedupConfig.url_dedup must be a boolean"):
        check_settings({"dedup": {"url_dedup": "false"}})
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with pytest.raises(ConfigError, match="DAGSTER_HOME is not set"):
        project_instance()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="is not a folder"):
        project_instance()


def test_every_record_rejected_is_named_with_its_rejects(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.jsonl").write_text('{"text": 7}\nnot json\n')
    write_docs(tmp_path / "good", "b.jsonl", 2, seed=1)
    shards = []
    for name, folder in (("web", bad), ("news", tmp_path / "good")):
        (manifest,) = plan_sources([(name, str(folder))], max_shards=1)
        shards.append(str(tmp_path / "raw" / manifest.key))
        build_raw_shard(manifest, shards[-1])
    assert require_documents(shards[1:]) == {"news": 2}
    with pytest.raises(DataError) as caught:
        require_documents(shards)
    assert str(caught.value) == (
        "source 'web' gave 0 documents from 1 files (2 records rejected at ingest): nothing to "
        f"filter or train on; see {shards[0]}/rejects.parquet for the reasons"
    )


def test_a_step_that_failed_on_bad_input_is_one_line(capsys) -> None:
    """Dagster raises ``Failure`` from the step's DataError: the command prints the DataError."""

    def failing_step() -> None:
        try:
            raise DataError("/data/x.jsonl: cut short\nafter 3 records")
        except DataError as exc:
            raise Failure(description=f"DataError: {exc}", allow_retries=False) from exc

    assert report_user_errors("data", failing_step) == 1
    err = capsys.readouterr().err
    assert err == "pretrain data: error: /data/x.jsonl: cut short after 3 records\n"
    with pytest.raises(ZeroDivisionError):  # a bug keeps its traceback
        report_user_errors("data", lambda: 1 / 0)


@pytest.mark.parametrize(
    "code, said",
    [(errno.ENOSPC, "no space left on the device: free space (or move the artifact root"),
     (errno.EROFS, "the file system is read-only: mount it read-write or choose another artifact"),
     (errno.EACCES, "permission denied: let the user that runs the pipeline write it")],
)  # fmt: skip
def test_a_store_that_refuses_writes_is_one_line_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, code: int, said: str
) -> None:
    """A full disk, a read-only root, a root this user may not write: ``pretrain data`` and
    ``pretrain experiments add`` end on one line naming the file and what to do. The refusal
    is injected at the one local file write (we run as root here: chmod would not refuse)."""
    from app.cli import main
    from pretrain import storage

    home, root = dagster_home(tmp_path), tmp_path / "artifacts"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    write_docs(tmp_path / "src", "a.jsonl", 2, seed=1)

    def refused(data: bytes, target: Path) -> None:
        raise OSError(code, os.strerror(code), str(target))

    monkeypatch.setattr(storage, "_write_local", refused)
    for args, command, where in (
        (["data", "--source", str(tmp_path / "src"), "--artifact-root", str(root)], "data",
         root / "manifests" / "web-0000.json"),
        (["experiments", "--root", str(root), "add", "p", "--weights", '{"web": 1}'],
         "experiments", root / "experiment_specs" / "p-s0.json"),
    ):  # fmt: skip
        assert main(args) == 1
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(f"pretrain {command}: error: cannot write {where}: {said}"), line


@pytest.mark.slow
def test_dagster_home_unset_or_missing_says_how_to_set_it(tmp_path: Path) -> None:
    write_docs(tmp_path / "src", "a.jsonl", 3, seed=1)
    line = one_error_line(pretrain(tmp_path, "data", "--source", str(tmp_path / "src")))
    assert "DAGSTER_HOME is not set" in line and "export DAGSTER_HOME=" in line
    missing = tmp_path / "no_such_home"
    line = one_error_line(
        pretrain(tmp_path, "data", "--source", str(tmp_path / "src"), home=missing)
    )
    assert f"DAGSTER_HOME={missing} is not a folder" in line and "mkdir -p" in line


@pytest.mark.slow
def test_empty_source_folder_and_files_that_are_all_empty(tmp_path: Path) -> None:
    home = dagster_home(tmp_path)
    (tmp_path / "empty").mkdir()
    line = one_error_line(
        pretrain(tmp_path, "data", "--source", str(tmp_path / "empty"), home=home)
    )
    assert f"no JSONL/Parquet/WARC/text files under {tmp_path / 'empty'}" in line
    blank = tmp_path / "blank"
    blank.mkdir()
    for name in ("a.jsonl", "b.jsonl.gz", "c.parquet"):
        (blank / name).write_bytes(b"")
    done = pretrain(tmp_path, "data", "--source", str(blank), "--source-name", "news", home=home)
    line = one_error_line(done)
    assert f"every file under {blank} for source 'news' is empty (3 files" in line
    assert not (tmp_path / "artifacts" / "raw_shards").exists()  # refused before ingest


@pytest.mark.slow
def test_a_source_whose_every_record_is_rejected_fails_after_ingest(tmp_path: Path) -> None:
    home = dagster_home(tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.jsonl").write_text('{"text": 7}\n{"no_text": "x"}\nnot json\n')
    done = pretrain(tmp_path, "data", "--source", str(bad), home=home)
    line = one_error_line(done)
    assert "source 'web' gave 0 documents from 1 files (3 records rejected at ingest)" in line
    assert "raw_shards/web-0000/rejects.parquet" in line
    rejects = pq.read_table(tmp_path / "artifacts/raw_shards/web-0000/rejects.parquet")
    assert sorted(rejects.column("reason").to_pylist()) == [
        "malformed_json", "missing_text", "text_not_string"
    ]  # fmt: skip
    assert "raw_shards[web-0000]: ok" in done.stdout and "quality_classifier:" not in done.stdout


@pytest.mark.slow
def test_bad_add_source_and_dedup_sizes_are_refused_before_any_run(tmp_path: Path) -> None:
    home = dagster_home(tmp_path)
    write_docs(tmp_path / "src", "a.jsonl", 3, seed=1)
    src = str(tmp_path / "src")
    line = one_error_line(
        pretrain(tmp_path, "data", "--source", src, "--add-source", src, home=home)
    )
    assert "use NAME=URI" in line
    done = pretrain(
        tmp_path, "data", "--source", src, "--dedup.bands", "7", "--dedup.rows", "16", home=home
    )
    line = one_error_line(done)
    assert "dedup bands=7 x hash_slices=1 need 9 band partitions" in line
    assert "dedup_pairs has 16 (bands=14 x hash_slices=1)" in line
    line = one_error_line(
        pretrain(tmp_path, "data", "--source", src, "--dedup.hash_slices", "2", home=home)
    )
    assert "hash_slices=2 need 32 band partitions" in line
    line = one_error_line(
        pretrain(tmp_path, "data", "--source", src, "--mixture.val_fraction", "2", home=home)
    )
    assert "val_fraction" in line
    assert not (tmp_path / "artifacts").exists()  # nothing ran


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_EVAL.is_dir(), reason="needs ../shared/data/eval")
def test_one_source_name_for_two_folders_and_a_cut_eval_file(tmp_path: Path) -> None:
    """``--add-source web=DIR`` for a second folder (twice) merges the folders into one source,
    every file once; a truncated eval file fails the mixture in one line naming the file."""
    home = dagster_home(tmp_path)
    first = write_docs(tmp_path / "one", "a.jsonl", 12, seed=1)
    second = write_docs(tmp_path / "two", "b.jsonl", 12, seed=2)
    second += write_docs(tmp_path / "two", "c.jsonl", 12, seed=3)
    evals = tmp_path / "evals"
    evals.mkdir()
    data = (SHARED_EVAL / "hellaswag_val_10042.jsonl.gz").read_bytes()
    (evals / "hellaswag_val_10042.jsonl.gz").write_bytes(data[: len(data) // 2])
    done = pretrain(
        tmp_path, "data", "--source", str(tmp_path / "one"), "--source-name", "web",
        "--add-source", f"web={tmp_path / 'two'}", "--add-source", f"web={tmp_path / 'two'}",
        "--shards", "2", home=home, timeout=900, PRETRAIN_EVAL_DIR=str(evals),
    )  # fmt: skip
    line = one_error_line(done)
    assert f"eval task file {evals / 'hellaswag_val_10042.jsonl.gz'} is cut short" in line
    assert "pretrain evals fetch --force" in line
    assert "registered 2 shard groups: web-0000, web-0001" in done.stdout
    manifests = [
        json.loads(p.read_text()) for p in sorted((tmp_path / "artifacts/manifests").iterdir())
    ]
    files = sorted(Path(f["uri"]).name for m in manifests for f in m["files"])
    assert files == ["a.jsonl", "b.jsonl", "c.jsonl"]  # each file once, none dropped
    texts = [
        row["text"]
        for key in ("web-0000", "web-0001")
        for row in pq.read_table(
            tmp_path / "artifacts/raw_shards" / key / "documents.parquet"
        ).to_pylist()
    ]
    assert sorted(texts) == sorted(first + second)
