"""``pretrain evals fetch`` against a local server with the Hub's file layout (issue 19, item 19).

The server answers ``/datasets/<repo>/resolve/<revision>/<path>`` like the Hub does (HEAD
with ``X-Repo-Commit``, ``X-Linked-Etag`` = the file's sha256 and its size; GET with the
bytes). Its Parquet files are made here from ``../shared/data/eval`` in the Hub repos' column
layout, and the real download code (``huggingface_hub`` via ``HF_ENDPOINT``) fetches,
hash-checks and converts them; the converted files must give the same examples as the shared
ones. Skips without ``../shared/data/eval``.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain.decontam import iter_eval_items
from pretrain.errors import DataError
from pretrain.eval.fetch import HUB_TASKS, _hellaswag_text, fetch_eval_tasks
from pretrain.eval.tasks import DEFAULT_FILES, MultipleChoice, TaskSpec, load_task
from pretrain.eval_cache import verify_eval_dir
from tests.helpers.shared_data import SHARED_EVAL

SHARED = SHARED_EVAL
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _jsonl(name: str) -> list[dict]:
    with gzip.open(SHARED / name, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _parquet(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def hub_files() -> dict[tuple[str, str, str], bytes]:
    """(repo, revision, path) → bytes, in each Hub repo's own columns."""
    files = {}
    hellaswag = []
    for row in _jsonl(DEFAULT_FILES["hellaswag"]):
        label, _, ctx = row["query"].partition(": ")
        hellaswag.append({
            "ind": row["ind"], "activity_label": label, "ctx_a": ctx, "ctx_b": "", "ctx": ctx,
            "endings": row["endings"], "source_id": "", "split": "val", "split_type": "indomain",
            "label": str(row["label"]),
        })  # fmt: skip
    files[("Rowan/hellaswag", "refs/convert/parquet", "default/validation/0000.parquet")] = (
        _parquet(hellaswag)
    )
    arc = [
        {
            "id": row["id"],
            "question": row["question"]["stem"],
            "choices": {
                "text": [c["text"] for c in row["question"]["choices"]],
                "label": [c["label"] for c in row["question"]["choices"]],
            },
            "answerKey": row["answerKey"],
        }
        for row in _jsonl(DEFAULT_FILES["arc_easy"])
    ]
    arc_file = HUB_TASKS[1].files[0]
    files[(arc_file.repo_id, arc_file.revision, arc_file.path)] = _parquet(arc)
    by_paradigm: dict[str, list[dict]] = {}
    for row in _jsonl(DEFAULT_FILES["blimp"]):
        by_paradigm.setdefault(row["UID"], []).append(row)
    for uid, rows in by_paradigm.items():
        files[("nyu-mll/blimp", "main", f"{uid}/train-00000-of-00001.parquet")] = _parquet(rows)
    with gzip.open(SHARED / "wikitext2_valid.tokens.txt.gz", "rt") as f:
        lines = [{"text": "" if not line.strip() else line} for line in f]
    files[("Salesforce/wikitext", "main", "wikitext-2-v1/validation-00000-of-00001.parquet")] = (
        _parquet(lines)
    )
    return files


class _Hub(BaseHTTPRequestHandler):
    files: dict[tuple[str, str, str], bytes] = {}
    requests: list[str] = []
    failing: dict[str, int] = {}  # repo → HTTP status it answers with (a server error)

    def _repo(self) -> str:
        parts = self.path.split("?")[0].split("/")
        return "/".join(parts[2:4]) if len(parts) > 3 else ""

    def _find(self) -> bytes | None:
        parts = self.path.split("?")[0].split("/")
        # /datasets/<owner>/<name>/resolve/<revision, URL-quoted>/<path...>
        if len(parts) < 7 or parts[1] != "datasets" or parts[4] != "resolve":
            return None
        key = (f"{parts[2]}/{parts[3]}", unquote(parts[5]), unquote("/".join(parts[6:])))
        return self.files.get(key)

    def _head(self, data: bytes | None) -> None:
        self.requests.append(f"{self.command} {self.path}")
        if self._repo() in self.failing:
            self.send_response(self.failing[self._repo()])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if data is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("X-Linked-Etag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
        self._head(self._find())

    def do_GET(self) -> None:  # noqa: N802
        data = self._find()
        self._head(data)
        if data is not None and self._repo() not in self.failing:
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hub():
    _Hub.files = hub_files()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _cleaned(ex: MultipleChoice) -> MultipleChoice:
    return MultipleChoice(
        context=_hellaswag_text(ex.context),
        choices=tuple(" " + _hellaswag_text(c) for c in ex.choices),
        gold=ex.gold,
    )


def _unpinned() -> tuple:
    """The real task list; the ARC file's pinned sha256 is the Hub's, not our stand-in's."""
    return tuple(
        dataclasses.replace(t, files=tuple(dataclasses.replace(f, sha256=None) for f in t.files))
        for t in HUB_TASKS
    )


@pytest.mark.slow  # a local Hub server
def test_fetch_downloads_checks_and_converts_every_task(hub: str, tmp_path: Path) -> None:
    report = fetch_eval_tasks(tmp_path / "evals", tasks=_unpinned(), endpoint=hub)
    assert (report.offline, report.failed) == (False, {})
    assert sorted(report.fetched) == ["arc_easy", "blimp", "hellaswag", "wikitext"]
    assert "4/4 tasks ready" in report.line()
    for kind, name in DEFAULT_FILES.items():
        cached = load_task(
            TaskSpec(kind=kind, path=str(tmp_path / "evals" / name), max_examples=10**6)
        )
        shared = load_task(TaskSpec(kind=kind, path=str(SHARED / name), max_examples=10**6))
        if kind == "hellaswag":  # the stand-in holds already-cleaned text; cleaning is re-applied
            shared = [_cleaned(ex) for ex in shared]
        assert cached == shared, kind
    wiki = "wikitext2_valid.tokens.txt.gz"
    assert list(iter_eval_items(str(tmp_path / "evals" / wiki))) == list(
        iter_eval_items(str(SHARED / wiki))
    )
    manifest = json.loads((tmp_path / "evals" / "SOURCES.json").read_text())
    assert len(manifest["blimp"]["sources"]) == 67
    assert manifest["arc_easy"]["sources"][0]["commit"] == COMMIT
    assert set(verify_eval_dir(tmp_path / "evals")) == set(report.fetched)
    again = fetch_eval_tasks(tmp_path / "evals", tasks=_unpinned(), endpoint=hub)
    assert sorted(again.cached) == sorted(report.fetched) and again.fetched == []
    (tmp_path / "evals" / DEFAULT_FILES["arc_easy"]).write_bytes(gzip.compress(b"{}\n"))
    with pytest.raises(DataError, match="changed after download"):
        verify_eval_dir(tmp_path / "evals")


@pytest.mark.slow  # a local Hub server
def test_a_file_whose_hash_does_not_match_is_refused(hub: str, tmp_path: Path) -> None:
    arc = HUB_TASKS[1]  # pinned to the real Hub file's sha256: our stand-in differs
    report = fetch_eval_tasks(tmp_path / "evals", tasks=(arc,), endpoint=hub)
    assert report.fetched == [] and "sha256" in report.failed["arc_easy"]
    assert not (tmp_path / "evals" / arc.output).exists()
    assert "FAILED arc_easy" in report.line()


def test_offline_is_one_clear_line(tmp_path: Path) -> None:
    report = fetch_eval_tasks(tmp_path / "evals", endpoint="http://127.0.0.1:9")
    assert report.offline and report.fetched == []
    assert "\n" not in report.line() and "unreachable" in report.line()


def test_task_files_put_there_by_hand_are_kept(tmp_path: Path) -> None:
    evals = tmp_path / "evals"
    evals.mkdir()
    own = evals / DEFAULT_FILES["blimp"]
    own.write_bytes((SHARED / DEFAULT_FILES["blimp"]).read_bytes())
    blimp = next(t for t in HUB_TASKS if t.name == "blimp")
    report = fetch_eval_tasks(evals, tasks=(blimp,), endpoint="http://127.0.0.1:9")
    assert report.present == ["blimp"] and not report.offline  # nothing had to be fetched
    assert "present, not from the Hub: blimp" in report.line()
    assert own.read_bytes() == (SHARED / DEFAULT_FILES["blimp"]).read_bytes()


@pytest.mark.slow  # a local Hub server
def test_a_task_that_cannot_be_fetched_does_not_stop_the_others(hub: str, tmp_path: Path) -> None:
    """One repo answers 403, one task's file is not its Parquet: both are reported, each with
    its reason, and the two others are fetched; ``pretrain evals fetch`` names every task."""
    hellaswag = HUB_TASKS[0].files[0]
    key = (hellaswag.repo_id, hellaswag.revision, hellaswag.path)
    good = _Hub.files[key]
    _Hub.files[key] = b"not a parquet file"
    _Hub.failing = {"Salesforce/wikitext": 403}
    try:
        report = fetch_eval_tasks(tmp_path / "evals", tasks=_unpinned(), endpoint=hub)
        assert sorted(report.fetched) == ["arc_easy", "blimp"] and not report.offline
        assert sorted(report.failed) == ["hellaswag", "wikitext"]
        assert "could not be converted" in report.failed["hellaswag"]
        assert "403" in report.failed["wikitext"]
        assert set(verify_eval_dir(tmp_path / "evals")) == {"arc_easy", "blimp"}
        # the command the user runs: one line naming every task, exit status 1
        done = subprocess.run(
            [str(Path(sys.executable).with_name("pretrain")), "evals", "fetch", "--dir",
             str(tmp_path / "cli")],
            capture_output=True, text=True, timeout=300, env={**os.environ, "HF_ENDPOINT": hub},
        )  # fmt: skip
    finally:
        _Hub.files[key], _Hub.failing = good, {}
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stdout.splitlines()
    assert "1/4 tasks ready" in line and "downloaded blimp" in line, line
    for task in ("arc_easy", "hellaswag", "wikitext"):  # arc_easy: pinned hash, not our copy's
        assert f"{task}: " in line.split("FAILED", 1)[1], line
