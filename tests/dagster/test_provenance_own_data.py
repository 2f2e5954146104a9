"""Issue 13: the input's id, source, url and other fields survive every stage; own data works.

The last test runs the README's command (`pretrain data --source DIR --source-name web`) in a
subprocess with a fresh DAGSTER_HOME and artifact root, on a folder of plain JSONL that has no
reference text for the quality classifier, exactly as a new user would, with a file of toxicity
labels (`--toxicity.labelled_uris`) that trains the toxicity classifier.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain import storage
from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.data.readers import RawFile, iter_records
from pretrain.filters.config import FilterConfig
from pretrain.filters.pipeline import filter_shard
from pretrain.quality.classifier import (
    QualityClassifierConfig,
    skipped_reason,
    train_quality_classifier,
)
from tests.helpers.corpora import PLAIN_SENTENCES
from tests.helpers.toxicity_labels import HOSTILE, VERBS, labelled_rows, write_labels

ROOT = Path(__file__).resolve().parents[2]

SENTENCES = PLAIN_SENTENCES[:16]


def _story(rng: random.Random) -> str:
    return " ".join(rng.sample(SENTENCES, 9))


def _write_jsonl(folder: Path, num_docs: int) -> list[dict]:
    rng = random.Random(13)
    records = [
        {"id": f"rec-{i}", "text": _story(rng), "source": "my-crawl", "lang_hint": "en",
         "meta": {"crawl": "2024-10", "rank": i}}
        for i in range(num_docs)
    ]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "part-0.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return records


def test_readers_keep_the_input_id_and_fields(tmp_path: Path) -> None:
    records = _write_jsonl(tmp_path / "in", 3)
    got = list(
        iter_records(RawFile(uri=str(tmp_path / "in" / "part-0.jsonl"), source="web", kind="jsonl"))
    )
    assert [g["source_id"] for g in got] == ["rec-0", "rec-1", "rec-2"]
    assert all(g["source"] == "web" for g in got)  # the mixture source
    meta = json.loads(got[1]["metadata"])
    assert meta == {
        "source": "my-crawl",
        "lang_hint": "en",
        "meta": {"crawl": "2024-10", "rank": 1},
    }
    table = pa.table({"id": [7, 8], "text": [records[0]["text"], None], "url": ["u0", "u1"],
                      "score": [0.5, 0.25]})  # fmt: skip
    pq.write_table(table, tmp_path / "in.parquet")
    rows = list(
        iter_records(RawFile(uri=str(tmp_path / "in.parquet"), source="web", kind="parquet"))
    )
    assert rows[0]["source_id"] == "7" and json.loads(rows[0]["metadata"]) == {
        "score": 0.5,
        "url": "u0",
    }
    assert rows[1]["reason"] == "missing_text" and rows[1]["source_id"] == "8"  # rejects too


def test_raw_and_filter_pass_provenance_and_classifier_skips_without_reference(
    tmp_path: Path,
) -> None:
    _write_jsonl(tmp_path / "in", 40)
    manifest = ShardManifest(
        key="web-0000",
        files=(RawFile(uri=str(tmp_path / "in" / "part-0.jsonl"), source="web", kind="jsonl"),),
    )
    build_raw_shard(manifest, str(tmp_path / "raw"))
    raw_uri = str(tmp_path / "raw" / "documents.parquet")
    qc = str(tmp_path / "qc")
    stats = train_quality_classifier([raw_uri], qc, QualityClassifierConfig())
    assert (
        stats.skipped and "only 0 reference" in stats.skipped and "reference_uris" in stats.skipped
    )
    assert skipped_reason(qc) == stats.skipped and not (tmp_path / "qc" / "model.bin").exists()
    filter_stats = filter_shard(raw_uri, str(tmp_path / "out"), FilterConfig(quality_model_uri=qc))
    assert filter_stats.kept > 30
    kept = pq.read_table(tmp_path / "out" / "documents.parquet").to_pylist()
    assert {k["source_id"] for k in kept} <= {f"rec-{i}" for i in range(40)}
    assert all(json.loads(k["metadata"])["source"] == "my-crawl" for k in kept)
    assert all(k["url"].endswith("#" + k["source_id"]) and k["source"] == "web" for k in kept)
    assert all(0.0 <= k["quality_score"] <= 1.0 for k in kept)  # the heuristic score
    written = storage.read_json(str(tmp_path / "out" / "stats.json"))
    assert written["quality_classifier_skipped"] == stats.skipped


@pytest.mark.slow
def test_readme_own_data_command_on_plain_jsonl(tmp_path: Path) -> None:
    records = _write_jsonl(tmp_path / "my_data", 60)
    # Four well-formed stories that turn hostile against an invented group (three hostile
    # sentences each: the filter drops a document at three), and the user's labels, which
    # train the toxicity classifier that catches them (nothing else knows them).
    rng = random.Random(7)
    hostile = [
        {"id": f"hostile-{i}", "text": _story(rng) + " " + " ".join(
            HOSTILE[(i + k) % len(HOSTILE)].format(verb=VERBS[i]) for k in range(3))}
        for i in range(4)
    ]  # fmt: skip
    with open(tmp_path / "my_data" / "part-1.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in hostile)
    labels = write_labels(tmp_path / "labels.jsonl.gz", labelled_rows())
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "PRETRAIN_ROOT": str(tmp_path / "artifacts"),
        "PYTHONPATH": str(ROOT),
    }
    (tmp_path / "dagster_home").mkdir()
    script = Path(sys.executable).with_name("pretrain")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]
    done = subprocess.run(
        [*command, "data", "--source", str(tmp_path / "my_data"), "--source-name", "web",
         "--toxicity.labelled_uris", json.dumps([labels])],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["raw_documents"] == 64 and summary["raw_rejected"] == 0
    assert summary["quality_classifier"].startswith("quality classifier skipped: only 0 reference")
    assert summary["toxicity_classifier"].startswith("trained on 45 toxic + 40 clean examples")
    shards = (tmp_path / "artifacts" / "filtered_shards").glob("*/rejects.parquet")
    rejects = [r for path in shards for r in pq.read_table(path).to_pylist()]
    toxic = {r["source_id"] for r in rejects if r["reason"] == "toxic_content"}
    assert toxic == {r["id"] for r in hostile}, [(r["source_id"], r["reason"]) for r in rejects]
    assert summary["train_docs"] + summary["val_docs"] == summary["dedup_kept"] > 0
    mixture = tmp_path / "artifacts" / "data_mixture"
    rows = pq.read_table(mixture / "train.parquet").to_pylist()
    rows += pq.read_table(mixture / "val.parquet").to_pylist()
    by_id = {r["id"]: r for r in records}
    for row in rows:  # joins back to the user's own records
        original = by_id[row["source_id"]]
        assert row["text"] == original["text"] and row["source"] == "web"
        assert json.loads(row["metadata"])["meta"] == original["meta"]
