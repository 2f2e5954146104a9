"""The loop from a loss spike back to the data, end to end through Dagster.

Documents (count-up word sequences, one packed sequence each) go through the real corpus assets
(``data_mixture`` → ``tokenizer`` → ``packed_tokens``); half the documents read at steps 41-42 are
then replaced by random words of the same length and the corpus is rebuilt. Training runs under
the poisoned-data harness of ``tests/faults/test_fault_injection.py`` (real torchrun, the real
``loss_spike_sensor``): the spike rolls back and skips 41-42; ``quarantine_sensor`` requests the
``quarantined_documents`` partition of the decision; the planted documents score highest; an
operator confirms through ``confirmed_quarantine`` (the ``review_quarantine`` job's asset); the
rebuilt mixture leaves them out; a fresh run on it has no spike there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dagster import AssetKey, DagsterInstance, build_sensor_context, instance_for_test, materialize

from app.definitions import ASSETS
from foundation.partitions import quarantine_partitions, shard_partitions
from pretrain import identity, storage
from pretrain.packing.ledger import BatchPlan, trace_steps
from pretrain.recovery.series import metric_rows
from resources.launcher import TorchrunLauncher
from resources.metrics import WandbMetricsReader
from resources.storage import ArtifactStore
from sensors.recovery.quarantine import quarantine_sensor
from tests.helpers.fault_campaign import POLICY, Campaign, train_config

pytestmark = pytest.mark.slow

WORDS = [a + b for a in "bdfgklmnprst" for b in "aeiou"][:24]  # one BPE token each
SEQ_LEN = 33  # 32 words + EOS: every document is exactly one packed sequence
NUM_DOCS = 1300
SPIKE_STEPS = [41, 42]
CORPUS = {
    "ops": {
        "data_mixture": {"config": {"decontam": None, "val_fraction": 0.02}},
        "tokenizer": {"config": {"vocab_size": 320}},
        "packed_tokens": {"config": {"seq_len": SEQ_LEN}},
    }
}


@pytest.fixture
def instance() -> Any:
    with instance_for_test() as inst:
        yield inst


def counting_text(rng: np.random.Generator) -> str:
    start, stride = int(rng.integers(len(WORDS))), int(rng.integers(1, 3))
    return " ".join(WORDS[(start + stride * i) % len(WORDS)] for i in range(SEQ_LEN - 1))


def random_text(rng: np.random.Generator) -> str:
    return " ".join(WORDS[int(i)] for i in rng.integers(len(WORDS), size=SEQ_LEN - 1))


def write_shard(store: ArtifactStore, texts: dict[str, str]) -> None:
    ids = sorted(texts)
    table = pa.table({"id": ids, "text": [texts[i] for i in ids], "source": ["web"] * len(ids)})
    storage.write_table(table, store.uri("deduped_shards", "s0", "documents.parquet"))
    identity.adopt(store.uri("deduped_shards", "s0"), "deduped_shards")


def resources_for(store: ArtifactStore) -> dict[str, Any]:
    return {
        "store": store,
        "metrics": WandbMetricsReader(run_root=store.local_dir("runs")),
        "proxy_launcher": TorchrunLauncher(nproc_per_node=1),  # every asset's resources
    }


def build_corpus(instance: DagsterInstance, store: ArtifactStore) -> Any:
    selection = [AssetKey(k) for k in ("data_mixture", "tokenizer", "packed_tokens")]
    result = materialize(
        ASSETS, selection=selection, instance=instance, resources=resources_for(store),
        run_config=CORPUS,
    )  # fmt: skip
    assert result.success
    return result


def step_documents(store: ArtifactStore) -> dict[int, list[str]]:
    """Documents read at the spike steps (by the runs' batch plan: 8 sequences, data seed 0)."""
    table = trace_steps(
        store.uri("packed_tokens"), BatchPlan(global_batch=8, micro_batch=8), SPIKE_STEPS
    )
    assert set(table["tokens"].to_pylist()) == {SEQ_LEN}  # one document per sequence
    return {
        s: sorted(table.filter(pa.compute.equal(table["step"], s))["doc_id"].to_pylist())
        for s in SPIKE_STEPS
    }


def losses(campaign: Campaign, branch: str) -> dict[int, float]:
    return {r.step: r.loss for r in metric_rows(campaign.history(branch)[0]) if not r.skipped}


def test_spike_documents_are_quarantined_confirmed_and_left_out(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    store = ArtifactStore(root=str(tmp_path / "artifacts"))
    resources = resources_for(store)
    instance.add_dynamic_partitions(shard_partitions.name, ["s0"])
    rng = np.random.default_rng(0)
    texts = {f"doc-{i:05d}": counting_text(rng) for i in range(NUM_DOCS)}
    write_shard(store, texts)
    build_corpus(instance, store)
    at_steps = step_documents(store)
    planted = {d for docs in at_steps.values() for d in docs[::2]}  # 4 of the 8 per step
    texts.update({d: random_text(rng) for d in sorted(planted)})
    write_shard(store, texts)
    build_corpus(instance, store)
    assert step_documents(store) == at_steps  # same lengths, same ids: the same layout

    # the spike: rolled back and skipped by loss_spike_sensor
    campaign = Campaign(instance, tmp_path / "artifacts", POLICY)
    campaign.launch(train_config(max_steps=50))
    campaign.drive()
    assert {r.run_key for r in campaign.requests} == {"rollback-b00-s000000041-to-b01"}

    # quarantine_sensor → one partition, one run; a second tick requests nothing
    context = build_sensor_context(instance=instance, resources={})
    result = quarantine_sensor(context)
    [add] = result.dynamic_partitions_requests
    [request] = result.run_requests
    key = "b00-s000000041-to-b01"
    assert list(add.partition_keys) == [key] and request.partition_key == key
    instance.add_dynamic_partitions(quarantine_partitions.name, list(add.partition_keys))
    assert quarantine_sensor(build_sensor_context(instance=instance)).run_requests == []
    scored = materialize(
        ASSETS, selection=[AssetKey("quarantined_documents")], partition_key=key,
        instance=instance, resources=resources, tags=request.tags,
    )  # fmt: skip
    meta = scored.asset_materializations_for_node("quarantined_documents")[0].metadata
    docs = storage.read_table(store.uri("quarantined_documents", key, "documents.parquet"))
    rows = docs.to_pylist()
    assert len(rows) == 16 and {r["decision_id"] for r in rows} == {key}
    top = {r["doc_id"] for r in rows[: len(planted)]}
    precision = len(top & planted) / len(top)
    print(f"top-{len(top)} precision {precision:.2f}; suspicion planted/clean:",
          [round(r["suspicion"], 2) for r in rows if r["doc_id"] in planted],
          [round(r["suspicion"], 2) for r in rows if r["doc_id"] not in planted])  # fmt: skip
    assert precision >= 0.9, [(r["doc_id"] in planted, r["suspicion"]) for r in rows]
    assert meta["num_documents"].value == 16 and "| 1 | `doc-" in meta["worst_documents_md"].value
    assert meta["rolled_back_to"].value == "b00-s000000030"

    # the operator confirms the suspicious ones; who and why land in the run tags
    review = {
        "ops": {
            "confirmed_quarantine": {
                "config": {
                    "decision_id": key, "action": "confirm", "reviewer": "ana",
                    "reason": "random-word pages", "min_score": 1.0,
                }
            }
        }
    }  # fmt: skip
    reviewed = materialize(
        ASSETS, selection=[AssetKey("confirmed_quarantine")], instance=instance,
        resources=resources, run_config=review,
    )  # fmt: skip
    tags = instance.get_run_by_id(reviewed.run_id).tags
    assert (tags["pretrain/reviewer"], tags["pretrain/review_action"]) == ("ana", "confirm")
    confirmed = storage.read_table(store.uri("confirmed_quarantine", "confirmed.parquet"))
    assert set(confirmed["doc_id"].to_pylist()) == planted

    # the rebuilt mixture leaves them out and says why
    rebuilt = build_corpus(instance, store)
    mix = rebuilt.asset_materializations_for_node("data_mixture")[0].metadata
    assert mix["quarantined_docs"].value == len(planted)
    train_ids = set(
        storage.read_table(store.uri("data_mixture", "train.parquet"))["id"].to_pylist()
    )
    assert not train_ids & planted and len(train_ids) > 1000

    # a fresh run on the rebuilt mixture: no rollback, nothing unusual at steps 41-42
    fresh = Campaign(instance, tmp_path / "artifacts", POLICY)
    fresh.launch(train_config(max_steps=50, branch="c00"))
    fresh.drive()
    assert fresh.requests == []
    clean = losses(fresh, "c00")
    baseline = float(np.mean([clean[s] for s in range(31, 41)]))
    print("fresh run losses 39-44:", {s: round(clean[s], 3) for s in range(39, 45)}, baseline)
    assert max(clean[s] for s in SPIKE_STEPS) < 1.2 * baseline + 0.25, (clean, baseline)
    spiked = losses(campaign, "b00")
    assert spiked[41] > 3 * clean[41] + 0.5, (spiked[41], clean[41])  # what the planted data did
