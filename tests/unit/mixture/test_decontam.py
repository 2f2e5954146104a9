"""Decontamination: 13-gram hashing, the four shared eval readers, and build_mixture drops."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.decontam import (
    DEFAULT_EVAL_FILES,
    DecontamConfig,
    EvalNgrams,
    _WordHasher,
    eval_format,
    iter_eval_items,
    ngram_hashes,
)
from pretrain.errors import DataError
from pretrain.mixture import MixtureConfig, build_mixture
from tests.helpers.shared_data import SHARED_EVAL

SHARED_EVAL_DIR = SHARED_EVAL
SHARED = [SHARED_EVAL_DIR / name for name in DEFAULT_EVAL_FILES]
needs_shared = pytest.mark.skipif(
    not all(p.is_file() for p in SHARED), reason="../shared/data/eval not present"
)
FILLER = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron"


def test_ngram_hashes_match_shared_runs_only():
    hasher = _WordHasher()
    a = ngram_hashes(hasher("One two three four five six"), 3)
    b = ngram_hashes(hasher("ONE, two: three! seven"), 3)
    assert len(a) == 4 and len(b) == 2
    assert a[0] == b[0] and b[1] not in set(a.tolist())
    assert len(ngram_hashes(hasher("too short"), 3)) == 0


def _write_eval(tmp: Path) -> str:
    path = tmp / "hellaswag_tiny.jsonl.gz"
    record = {"query": "A man is sitting on a roof and he", "endings": ["starts pulling up "
              "roofing nails one by one with a hammer.", "jumps."], "label": 0, "ind": 0}  # fmt: skip
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(record) + "\n")
    return str(path)


def test_build_mixture_drops_and_audits_contaminated_train_docs(tmp_path):
    eval_file = _write_eval(tmp_path)
    leaked = "intro text A man is sitting on a roof and he starts pulling up roofing nails ok"
    docs = [{"text": f"{FILLER} {n}", "source": "web"} for n in range(40)]
    docs.append({"text": leaked, "source": "web"})
    docs = [{**d, "id": doc_id(d["text"], d["source"])} for d in docs]
    uri = str(tmp_path / "docs.parquet")
    storage.write_table(documents_table(docs), uri)
    config = MixtureConfig(val_fraction=0.0, min_val_docs=0,
                           decontam=DecontamConfig(eval_files=(eval_file,)))  # fmt: skip
    stats = build_mixture([uri], str(tmp_path / "out"), config)
    assert stats.decontam["dropped"] == 1
    assert stats.decontam["dropped_by_eval_set"] == {"hellaswag_tiny": 1}
    assert stats.decontam["sets"]["hellaswag_tiny"]["items"] == 2
    assert stats.decontam["sets"]["hellaswag_tiny"]["items_too_short"] == 1  # "... he jumps."
    train = storage.read_table(str(tmp_path / "out" / "train.parquet")).column("text")
    assert leaked not in train.to_pylist() and len(train) == 40
    audit = storage.read_table(str(tmp_path / "out" / "decontaminated.parquet")).to_pylist()
    assert audit == [{"id": docs[-1]["id"], "source": "web", "eval_sets": "hellaswag_tiny"}]


def test_missing_eval_files_fail_unless_skipped(tmp_path):
    config = DecontamConfig(eval_files=(str(tmp_path / "nope.jsonl.gz"),))
    with pytest.raises(DataError, match="skip_missing=True"):
        EvalNgrams.load(config)
    loaded = EvalNgrams.load(DecontamConfig(eval_files=config.eval_files, skip_missing=True))
    assert loaded.report()["missing_files"] == list(config.eval_files) and not loaded.sets


@needs_shared
def test_shared_eval_readers_and_matches():
    assert [eval_format(str(p)) for p in SHARED] == ["hellaswag", "arc", "blimp", "wikitext"]
    first = {p.name: next(iter_eval_items(str(p))) for p in SHARED}
    assert first[SHARED[0].name].startswith("Roof shingle removal: A man is sitting on a roof.")
    assert (
        first[SHARED[1].name] == "Which technology was developed most recently? cellular telephone"
    )
    assert first[SHARED[2].name] == "Who should Derek hug after shocking Richard?"
    ngrams = EvalNgrams.load(DecontamConfig(eval_files=(str(SHARED[0]), str(SHARED[3]))))
    report = ngrams.report()["sets"]
    assert report["hellaswag_val_10042"]["items"] == 4 * 10042
    assert report["wikitext2_valid"]["ngrams"] > 50_000
    hs = "Roof shingle removal: A man is sitting on a roof. he starts pulling up roofing on a roof."
    assert ngrams.matches(f"blog post. {hs} The end.") == ["hellaswag_val_10042"]
    wiki = "Homarus gammarus, known as the European lobster or common lobster, is a species"
    assert ngrams.matches(wiki) == ["wikitext2_valid"]
    assert ngrams.matches(FILLER + " " + FILLER) == []
    assert isinstance(ngrams.sets["wikitext2_valid"], np.ndarray)


def test_default_files_come_from_the_eval_cache_and_nothing_found_is_loud(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("PRETRAIN_EVAL_DIR", str(tmp_path / "cache"))
    config = DecontamConfig(skip_missing=True)
    assert config.resolved_files() == tuple(
        str(tmp_path / "cache" / name) for name in DEFAULT_EVAL_FILES
    )
    docs = [{"text": f"{FILLER} {n}", "source": "web"} for n in range(20)]
    docs = [{**d, "id": doc_id(d["text"], d["source"])} for d in docs]
    uri = str(tmp_path / "docs.parquet")
    storage.write_table(documents_table(docs), uri)
    mixture = MixtureConfig(val_fraction=0.0, min_val_docs=0, decontam=config)
    stats = build_mixture([uri], str(tmp_path / "out"), mixture)
    assert stats.decontam["checked_against"] == []
    assert "DECONTAMINATION CHECKED NOTHING" in stats.decontam["warning"]
    assert stats.warnings[0] == stats.decontam["warning"]
    assert "DECONTAMINATION CHECKED NOTHING" in caplog.text
    # with the task file in the cache, it is checked against
    (tmp_path / "cache").mkdir()
    _write_eval(tmp_path / "cache")
    found = EvalNgrams.load(DecontamConfig(eval_files=("hellaswag_tiny.jsonl.gz",)))
    assert found.report()["checked_against"] == ["hellaswag_tiny"]
    assert "warning" not in found.report()
