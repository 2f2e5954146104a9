"""Documented settings that used to crash or fail late (issue 26, §3), on a real Dagster instance.

- ``--filter.toxicity null`` switches the rule family off, also when a toxicity-classifier
  result is recorded (it crashed the filter stage in ``dataclasses.replace``);
- a Launchpad run whose dedup sizes need other band partitions is refused at its first step,
  before it writes anything; URL dedup switched off keeps the same partitions;
- a training launch that sets only ``data.micro_batch_size`` gets the recipe's global batch
  derived again (it failed: "2050 is not a multiple of 4"), and a global batch that does not
  divide says which field to set.

Run::

    .venv/bin/pytest -q tests/faults/test_setting_errors.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance, Failure

from app.definitions import build_definitions
from foundation.partitions import band_partitions
from foundation.shards import plan_sources, register_shards
from foundation.train_config import TrainRunConfig, resolve_train_config
from pretrain import identity, storage
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.pairs import band_pairs, band_partition_keys, check_partition_layout
from pretrain.errors import ConfigError
from pretrain.packing.format import FORMAT
from pretrain.train.config import DataConfig
from pretrain.train.recipes import recipe_with_overrides
from resources.storage import ArtifactStore
from tests.helpers.corpora import PLAIN_SENTENCES

SENTENCES = PLAIN_SENTENCES[:9]


def story(i: int) -> str:
    return f"Report {i}. " + " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(8))


@pytest.mark.slow
def test_toxicity_null_with_a_recorded_classifier_and_dedup_sizes_at_launch(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    rows = [{"text": story(i), "url": f"https://news.example/{i}"} for i in range(30)]
    rows.append({"text": story(40), "url": "https://news.example/3"})  # same URL, other text
    (src / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    root = str(tmp_path / "artifacts")
    defs = build_definitions(artifact_root=root)
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(tempdir=str(tmp_path / "home")) as instance:
        (key,) = register_shards(
            instance, ArtifactStore(root=root), plan_sources([("web", str(src))], max_shards=1)
        )

        def run(job: str, partition: str | None = None, config: dict | None = None) -> None:
            defs.resolve_job_def(f"{job}_job").execute_in_process(
                instance=instance, partition_key=partition, run_config=config
            )

        run("raw_shards", key)
        run("quality_classifier")
        run("toxicity_classifier")  # no labels: skipped, and its result recorded
        assert identity.read(storage.join(root, "toxicity_classifier")) is not None
        # (URL dedup in the filter off too: the dedup stage's url partition is tested below)
        filter_config = {"toxicity": None, "urls": {"dedup_urls": False}}
        off = {"ops": {"filtered_shards": {"config": filter_config}}}
        run("filtered_shards", key, off)
        run("minhash_signatures", key)
        filtered = storage.join(root, "filtered_shards", key)
        kept = pq.read_table(storage.join(filtered, "documents.parquet")).num_rows
        rejects = pq.read_table(storage.join(filtered, "rejects.parquet"))
        assert kept + rejects.num_rows == 31 and kept > 25
        assert "toxic_content" not in rejects.column("reason").to_pylist()
        recorded = identity.read(filtered)
        assert recorded is not None and not any(
            u.endswith("toxicity_classifier") for u in recorded.inputs
        )

        # a Launchpad run of one band partition with 7 bands: refused before it writes
        seven = {"ops": {"dedup_pairs": {"config": {"bands": 7, "rows": 16}}}}
        with pytest.raises(Failure, match="need 9 band partitions, but dedup_pairs has 16") as no:
            run("dedup_pairs", "b000-s000", seven)
        assert isinstance(no.value.__cause__, ConfigError) and not no.value.allow_retries
        assert not Path(root, "dedup_pairs").exists()

    # URL dedup off: the same partitions; its url partition finds no pairs
    off_url = DedupConfig(url_dedup=False)
    assert band_partition_keys(off_url) == band_partition_keys(DedupConfig())
    check_partition_layout(off_url, band_partitions.get_partition_keys())
    signatures = [storage.join(root, "minhash_signatures", key, "signatures.parquet")]
    clusters = str(tmp_path / "clusters")
    found = {}
    for config in (DedupConfig(), off_url):
        out = str(tmp_path / f"url-{config.url_dedup}" / "pairs.parquet")
        found[config.url_dedup] = band_pairs(signatures, clusters, out, "url-s000", config).pairs
    assert found == {True: 1, False: 0}


def packed_index(folder: Path, seq_len: int, vocab_size: int = 32000) -> str:
    """A committed packed directory's index: what a recipe reads to size its model."""
    folder.mkdir(parents=True)
    index = {"format": FORMAT, "seq_len": seq_len, "vocab_size": vocab_size}
    (folder / "index.json").write_text(json.dumps(index))
    storage.commit_marker(str(folder))
    return str(folder)


def test_micro_batch_alone_derives_the_global_batch_again(tmp_path: Path) -> None:
    # llama_7b's 4M tokens per step at context 2047 is 2050 sequences of micro-batch 2
    packed = packed_index(tmp_path / "packed", seq_len=2047)
    recipe = recipe_with_overrides("llama_7b", packed_dir=packed, run_root=str(tmp_path / "runs"))
    assert (recipe.data.micro_batch_size, recipe.data.global_batch_sequences) == (2, 2050)
    cfg = recipe_with_overrides(
        "llama_7b", packed_dir=packed, run_root=str(tmp_path / "runs"),
        overrides={"data": {"micro_batch_size": 4}},
    )  # fmt: skip
    assert (cfg.data.micro_batch_size, cfg.data.global_batch_sequences) == (4, 2048)
    tiny = recipe_with_overrides(
        "debug_tiny", packed_dir=packed, run_root=str(tmp_path / "runs"),
        overrides={"data": {"micro_batch_size": 3}},
    )  # fmt: skip
    assert tiny.data.global_batch_sequences == 15  # 16 sequences, the nearest multiple of 3
    # from the Launchpad: the train op's own resolution of its launch config
    store = ArtifactStore(root=str(tmp_path / "artifacts"))
    packed_index(tmp_path / "artifacts" / "packed_tokens", seq_len=2047)
    launched = resolve_train_config(
        TrainRunConfig(recipe="llama_7b", data={"micro_batch_size": 4}), store
    )
    assert launched.data.global_batch_sequences == 2048
    # both set, and they do not divide: the message says which field, and to what
    with pytest.raises(ConfigError) as caught:
        recipe_with_overrides(
            "llama_7b", packed_dir=packed, run_root=str(tmp_path / "runs"),
            overrides={"data": {"micro_batch_size": 4, "global_batch_sequences": 2050}},
        )  # fmt: skip
    assert "set data.global_batch_sequences to 2048 or 2052" in str(caught.value)
    with pytest.raises(ConfigError, match="set data.global_batch_sequences to 8 or 12"):
        DataConfig(packed_dir=packed, micro_batch_size=4, global_batch_sequences=10)
