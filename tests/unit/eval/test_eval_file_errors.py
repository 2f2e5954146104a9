"""Damaged evaluation task files are named, and a cached file changed since it was fetched is
refused (issue 26, §3).

Real gzip files in a real eval cache (a folder with ``SOURCES.json`` as ``pretrain evals
fetch`` writes it): the zero-shot tasks (:mod:`pretrain.eval.tasks`) and decontamination
(:mod:`pretrain.decontam`) read them. A truncated file, a file that is not gzip, and a
bit-flipped one each raise a ``DataError`` that names the file; a cached file edited or damaged
after download is refused by its recorded sha256 before anything reads it. Run::

    .venv/bin/pytest -q tests/unit/eval/test_eval_file_errors.py
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from pretrain.decontam import DecontamConfig, EvalNgrams
from pretrain.errors import DataError
from pretrain.eval.tasks import TaskSpec, load_task
from pretrain.eval_cache import MANIFEST

NAME = "hellaswag_val_10042.jsonl.gz"


def hellaswag_rows(count: int) -> list[dict]:
    return [
        {
            "ind": i,
            "query": f"Cooking pasta {i}: the cook fills a large pot with water and",
            "endings": [
                f"puts it on the stove to boil before adding salt and the pasta number {i}.",
                "throws the pot out of the window of the kitchen on the third floor.",
                "paints the pot blue and hangs it on the wall of the dining room.",
                "reads a newspaper while the water stays cold in the sink all day.",
            ],
            "label": 0,
        }
        for i in range(count)
    ]


def gz_jsonl(rows: list[dict]) -> bytes:
    return gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode(), mtime=0)


def cache_with(folder: Path, data: bytes) -> Path:
    """An eval cache holding one task file and its ``SOURCES.json`` record."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NAME).write_bytes(data)
    record = {"output": NAME, "sha256": hashlib.sha256(data).hexdigest(), "sources": []}
    (folder / MANIFEST).write_text(json.dumps({"hellaswag": record}))
    return folder / NAME


def decontam(folder: Path) -> EvalNgrams:
    return EvalNgrams.load(DecontamConfig(eval_files=(NAME,), eval_dir=str(folder)))


def test_cached_files_are_checked_against_their_recorded_hash(tmp_path: Path) -> None:
    data = gz_jsonl(hellaswag_rows(300))
    path = cache_with(tmp_path / "evals", data)
    assert decontam(tmp_path / "evals").report()["sets"]["hellaswag_val_10042"]["items"] == 1200
    assert len(load_task(TaskSpec(kind="hellaswag", path=str(path), max_examples=50))) == 50
    # edited: still valid gzip and JSON, one ending changed, used silently before
    rows = hellaswag_rows(300)
    rows[7]["endings"][0] = "answers the question that the evaluation set asks, word for word."
    path.write_bytes(gz_jsonl(rows))
    for read in (
        lambda: decontam(tmp_path / "evals"),
        lambda: load_task(TaskSpec(kind="hellaswag", path=str(path))),
    ):
        with pytest.raises(DataError, match="changed after download") as caught:
            read()
        assert str(path) in str(caught.value) and "pretrain evals fetch --force" in str(
            caught.value
        )
    # one flipped bit: refused by its hash before the reader sees it
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x10
    path.write_bytes(bytes(flipped))
    with pytest.raises(DataError, match="changed after download"):
        decontam(tmp_path / "evals")


@pytest.mark.parametrize("damage", ["truncated", "not_gzip", "bit_flip"])
def test_a_damaged_file_of_ones_own_is_named(tmp_path: Path, damage: str) -> None:
    """A task file no ``SOURCES.json`` records (the user's own): read, and named when damaged."""
    data = gz_jsonl(hellaswag_rows(3000))
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "not_gzip":
        data = b"".join(json.dumps(r).encode() + b"\n" for r in hellaswag_rows(5))
    else:
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 0x10
        data = bytes(flipped)
    folder = tmp_path / "mine"
    folder.mkdir()
    path = folder / NAME
    path.write_bytes(data)
    expected = {
        "truncated": "is cut short",
        "not_gzip": "is not a gzip file",
        "bit_flip": "",  # a bad deflate block, a CRC error or a garbled line: any, but named
    }[damage]
    for read in (
        lambda: decontam(folder),
        lambda: load_task(TaskSpec(kind="hellaswag", path=str(path), max_examples=10)),
    ):
        with pytest.raises(DataError) as caught:
            read()
        message = str(caught.value)
        assert str(path) in message and expected in message, message
        assert "\n" not in message


def test_a_record_without_the_format_fields_names_the_line(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    rows = hellaswag_rows(4)
    del rows[2]["endings"]
    (folder / NAME).write_bytes(gz_jsonl(rows))
    with pytest.raises(DataError, match=r"line 3 does not have the hellaswag fields"):
        decontam(folder)
