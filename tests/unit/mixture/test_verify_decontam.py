"""The ``train_decontaminated`` check on data_mixture: 13-gram overlap with eval files."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pretrain import storage, verify
from pretrain.decontam import DecontamConfig
from pretrain.mixture import write_documents

EVAL_ITEM = "A man is sitting on a roof and he starts pulling up roofing nails one by one"
FILLER = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"


def _eval_file(tmp: Path) -> str:
    path = tmp / "tiny_eval.jsonl"
    path.write_text(json.dumps({"text": EVAL_ITEM}) + "\n" + json.dumps({"text": "too short"}))
    return str(path)


def _train(tmp: Path, texts: list[str]) -> str:
    uri = str(tmp / "train.parquet")
    ids = [f"doc-{n}" for n in range(len(texts))]
    table = pa.table({"id": ids, "text": texts, "source": ["web"] * len(texts)})
    write_documents(table, uri, max_bytes=64)  # several row groups: all are read
    return uri


def test_clean_train_passes(tmp_path):
    uri = _train(tmp_path, [f"{FILLER} {n}" for n in range(30)])
    outcome = verify.train_decontaminated(uri, DecontamConfig(eval_files=(_eval_file(tmp_path),)))
    assert outcome.passed
    assert outcome.metadata["contaminated"] == 0 and outcome.metadata["train_rows"] == 30
    assert outcome.metadata["contaminated_by_eval_set"] == {"tiny_eval": 0}
    assert outcome.description.startswith("0 training documents (30 rows read) share a 13-gram")


def test_contaminated_train_fails_and_names_documents(tmp_path):
    # punctuation and case do not hide the match: words are normalized
    leaked = f"Intro. A MAN is sitting on a roof, and he starts pulling up roofing nails! {FILLER}"
    texts = [f"{FILLER} {n}" for n in range(20)] + [leaked, leaked]  # doc-20, doc-21
    texts[3] = "A man is sitting on a roof and he starts pulling up weeds"  # 12 shared: no match
    uri = _train(tmp_path, texts)
    eval_file = _eval_file(tmp_path)
    missing = str(tmp_path / "absent.jsonl")
    config = DecontamConfig(eval_files=(eval_file, missing), skip_missing=True)
    outcome = verify.train_decontaminated(uri, config)
    assert not outcome.passed
    assert outcome.metadata["contaminated"] == 2 and outcome.metadata["train_rows"] == 22
    assert outcome.metadata["examples"] == ["doc-20 (tiny_eval)", "doc-21 (tiny_eval)"]
    assert outcome.metadata["contaminated_by_eval_set"] == {"tiny_eval": 2}
    assert outcome.metadata["missing_eval_files"] == [missing]
    assert "2 training documents (22 rows read)" in outcome.description
    assert "skipped missing" in outcome.description


def test_repeated_epochs_count_one_document(tmp_path):
    leaked = f"{EVAL_ITEM} {FILLER}"
    uri = str(tmp_path / "train.parquet")
    table = pa.table({"id": ["a", "b", "a"], "text": [leaked, FILLER, leaked]})
    write_documents(table, uri)
    config = DecontamConfig(eval_files=(_eval_file(tmp_path),))
    outcome = verify.train_decontaminated(uri, config)
    assert not outcome.passed and outcome.metadata["contaminated"] == 1
    assert outcome.metadata["train_rows"] == 3


def test_no_eval_files_passes_trivially(tmp_path):
    uri = _train(tmp_path, [EVAL_ITEM])  # would match, but there is nothing to match against
    none = verify.train_decontaminated(uri, None)
    assert none.passed and "no eval files configured" in none.description
    absent = DecontamConfig(eval_files=(str(tmp_path / "x.jsonl"),), skip_missing=True)
    outcome = verify.train_decontaminated(uri, absent)
    assert outcome.passed and "none of 1 eval files exist" in outcome.description
    assert outcome.metadata["missing_eval_files"] == [str(tmp_path / "x.jsonl")]


def test_mixture_writes_bounded_row_groups(tmp_path):
    texts = [f"{FILLER} {n}" for n in range(10)]  # 82-83 bytes each
    uri = _train(tmp_path, texts)
    meta = pq.ParquetFile(uri).metadata
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    assert sizes == [1] * 10  # each text crosses the 64-byte window
    assert storage.read_table(uri).column("text").to_pylist() == texts
