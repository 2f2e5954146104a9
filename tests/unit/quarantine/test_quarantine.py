"""Quarantine library: a skip window's documents scored with a real checkpoint, reviewed,
resolved to a confirmed set, and left out of a real mixture (with their duplicate clusters)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.cli import main
from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.mixture import MixtureConfig, build_mixture
from pretrain.packing.ledger import BatchPlan, step_sequences
from pretrain.packing.stream import LEDGER_SCHEMA
from pretrain.quarantine import (
    QuarantineConfig,
    ReviewAction,
    SkipRecord,
    exclusion_reasons,
    quarantine_decision,
    read_decision_documents,
    read_reviews,
    record_review,
    resolve_confirmed,
)
from pretrain.quarantine.scoring import score_window, window_pieces
from tests.helpers.eval_data import SEQ_LEN, VOCAB, train_checkpoint
from tests.helpers.eval_data import make_packed as make_clean_packed

PLAN = BatchPlan(global_batch=8, micro_batch=8)
HALF = SEQ_LEN // 2


def make_window_packed(root: Path, num_train: int = 64) -> set[str]:
    """A packed dir whose steps 1-2 read 16 sequences, 6 of them random tokens; every sequence
    holds two documents (pieces ``[0, HALF)`` and ``[HALF, SEQ_LEN)``). Returns the poisoned ids
    (both documents of a random sequence)."""
    make_clean_packed(root)
    tokens = np.fromfile(root / "train-00000.bin", dtype="<u2").reshape(num_train, SEQ_LEN)
    window = step_sequences(str(root), PLAN, [1, 2])["seq_index"].to_pylist()
    bad = sorted(window)[::3][:6]
    tokens[bad] = np.random.default_rng(3).integers(3, VOCAB, (len(bad), SEQ_LEN))
    tokens.tofile(root / "train-00000.bin")
    rows = []
    for seq in range(num_train):
        kind = "noise" if seq in bad else "web"
        for part, (lo, hi) in enumerate([(0, HALF), (HALF, SEQ_LEN)]):
            rows.append(
                {
                    "seq_index": seq, "doc_id": f"{kind}-{seq:03d}-{part}", "source": kind,
                    "epoch": 0, "token_start": lo, "token_end": hi, "doc_token_offset": 0,
                    "split": "train", "stage": 0,
                }
            )  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, schema=LEDGER_SCHEMA), root / "ledger.parquet")
    return {f"noise-{s:03d}-{p}" for s in bad for p in (0, 1)}


@pytest.fixture(scope="module")
def healthy_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("quarantine")
    packed = make_clean_packed(root / "clean")
    return train_checkpoint(packed, root / "runs", max_steps=30)


@pytest.mark.slow
def test_planted_documents_score_highest(
    healthy_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    packed = tmp_path / "packed_tokens"
    poisoned = make_window_packed(packed)
    mixture = tmp_path / "train.parquet"
    texts = {d: "call ann@example.org | +1 415 555 0100 now" for d in sorted(poisoned)}
    source_ids = [f"crawl-{d}" for d in texts]  # provenance from the documents, not the ledger
    storage.write_table(
        pa.table({"id": list(texts), "text": list(texts.values()), "source_id": source_ids}),
        str(mixture),
    )
    record = SkipRecord(
        decision_id="b00-s000000001-to-b01", branch="b00", window=(1, 3), spike_step=1,
        packed_dir=str(packed), plan=PLAN, healthy_checkpoint=str(healthy_checkpoint),
        documents_uri=str(mixture),
    )  # fmt: skip
    out = tmp_path / "quarantined_documents" / record.decision_id
    stats = quarantine_decision(record, str(out), QuarantineConfig(top_documents=5))

    docs = pq.read_table(out / "documents.parquet").to_pylist()
    assert stats.num_documents == len(docs) == 32 and stats.scored_documents == 32
    assert stats.tokens == 16 * SEQ_LEN == sum(d["tokens"] for d in docs)
    top = [d["doc_id"] for d in docs[: len(poisoned)]]
    precision = len(set(top) & poisoned) / len(poisoned)
    assert precision >= 0.9, (precision, top)
    assert [d["rank"] for d in docs] == list(range(1, 33))
    assert all(d["decision_id"] == record.decision_id and d["branch"] == "b00" for d in docs)
    assert all(d["steps"] in ([1], [2]) for d in docs)
    assert {d["doc_id"]: d["source_id"] for d in docs if d["source_id"]} == {
        d: f"crawl-{d}" for d in poisoned
    }
    clean = [d["loss"] for d in docs if d["doc_id"] not in poisoned]
    noisy = [d["loss"] for d in docs if d["doc_id"] in poisoned]
    assert max(clean) < 1.0 < np.log(VOCAB) * 0.8 < min(noisy)
    assert min(d["suspicion"] for d in docs if d["doc_id"] in poisoned) > 2.0
    # the baseline is ordinary train data, not the window: clean documents score near 0
    assert stats.reference_loss < 1.0
    assert max(abs(d["suspicion"]) for d in docs if d["doc_id"] not in poisoned) < 1.0
    # the review table: 5 rows, the worst first, PII masked in the preview
    meta = stats.as_metadata()
    table = meta["worst_documents_md"].splitlines()
    assert len(table) == 2 + 5 and "| 1 | `noise-" in table[2]
    assert "ann@example.org" not in meta["worst_documents_md"]
    assert "&lt;EMAIL&gt; \\| &lt;PHONE&gt; now" in meta["worst_documents_md"]
    # source view: noise is all of the quarantined noise tokens but ~4.7% of the mixture
    [noise] = [r for r in stats.sources if r["source"] == "noise"]
    assert noise["quarantined_documents"] == 12 and noise["mixture_share"] == round(6 / 64, 4)
    assert noise["quarantined_share"] == pytest.approx(6 / 16, abs=1e-3)
    assert stats.sources[0]["source"] == "noise" and noise["over_representation"] == 4.0
    assert json.loads((out / "decision.json").read_text())["window"] == [1, 3]
    assert read_decision_documents(str(tmp_path / "quarantined_documents")).num_rows == 32
    # `pretrain status`: the decision, pending, and the source view
    main(["status", "--root", str(tmp_path)])
    printed = capsys.readouterr().out.splitlines()
    assert "quarantine: 1 decision(s), 32 documents, 0 confirmed" in printed
    assert any(line.startswith(f"  {record.decision_id}: 32 documents, 528 tokens") and
               line.endswith("pending (0)") for line in printed)  # fmt: skip
    assert "  source noise: 37.5% of quarantined tokens, 9.4% of the mixture (4.00x)" in printed


def decisions_table() -> pa.Table:
    rows = [
        {"doc_id": d, "source": "web", "source_id": None, "tokens": 10, "suspicion": s,
         "decision_id": dec}
        for dec, d, s in [("d1", "a", 3.0), ("d1", "b", 0.1), ("d2", "c", 2.0), ("d2", "d", None)]
    ]  # fmt: skip
    return pa.Table.from_pylist(rows)


def test_reviews_confirm_extend_release_in_order(tmp_path: Path) -> None:
    reviews = str(tmp_path / "reviews")

    def review(run_id: str, at: str, **kw) -> None:
        action = ReviewAction(reviewer="ana", reason=f"why {run_id}", **kw)
        record_review(action, reviews, run_id=run_id, at=at, known={"d1", "d2"})

    review("r1", "20260101T000001", decision_id="d1", action="confirm", min_score=1.0)
    review("r1", "20260101T000009", decision_id="d1", action="release")  # a retry: no-op
    review("r2", "20260101T000002", decision_id="d2", action="confirm")
    review("r3", "20260101T000003", decision_id="d2", action="extend", doc_ids=("e",))
    review("r4", "20260101T000004", decision_id="d2", action="release")
    review("r5", "20260101T000005", decision_id="d2", action="extend", doc_ids=("f",))
    with pytest.raises(ConfigError, match="no quarantine for decision 'd9'"):
        review("r6", "20260101T000006", decision_id="d9", action="confirm")
    log = read_reviews(reviews)
    assert [r["run_id"] for r in log] == ["r1", "r2", "r3", "r4", "r5"]

    confirmed, status = resolve_confirmed(decisions_table(), log)
    assert [(r["decision_id"], r["doc_id"]) for r in confirmed.to_pylist()] == [
        ("d1", "a"),
        ("d2", "f"),
    ]
    assert status["d1"]["status"] == "confirmed" and status["d1"]["confirmed"] == 1
    assert status["d2"]["reviews"] == 4 and status["d2"]["last_review"]["reason"] == "why r5"
    pending, status = resolve_confirmed(decisions_table(), [])
    assert pending.num_rows == 0 and status["d1"]["status"] == "pending"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"action": "confirm", "reviewer": " ", "reason": "x"}, r"needs reviewer \(who decided"),
        ({"action": "confirm"}, "needs reviewer .* and reason .*: set reviewer and reason"),
        ({"action": "extend", "reviewer": "a", "reason": "x"}, "needs doc_ids"),
        ({"action": "drop", "reviewer": "a", "reason": "x"}, "set action to one of confirm"),
        ({"action": "release", "reviewer": "a", "reason": "x", "min_score": 1.0}, "min_score"),
        ({"action": "confirm", "reviewer": "a", "reason": "x", "decision_id": "../x"}, "letters"),
    ],
)
def test_bad_review_is_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ReviewAction(**{"decision_id": "d1", **kwargs})


def test_mixture_leaves_out_the_quarantine_and_its_duplicates(tmp_path: Path) -> None:
    docs = [
        {"id": f"w{i}", "text": f"web text number {i} " * 20, "source": "web"} for i in range(40)
    ]
    uri = str(tmp_path / "docs.parquet")
    storage.write_table(pa.Table.from_pylist(docs), uri)
    clusters = str(tmp_path / "clusters.parquet")
    storage.write_table(
        pa.table(
            {"id": ["w1", "w7", "x9"], "cluster_id": [0, 0, 0],
             "reason": ["survivor", "near_duplicate", "exact_duplicate"]}
        ),
        clusters,
    )  # fmt: skip
    confirmed, _ = resolve_confirmed(
        decisions_table().filter(pa.compute.equal(decisions_table()["decision_id"], "d1")),
        [{"decision_id": "d1", "action": "confirm", "reviewer": "ana", "reason": "junk"}],
    )
    confirmed = pa.Table.from_pylist(
        [{**r, "doc_id": "w1"} for r in confirmed.to_pylist()], schema=confirmed.schema
    )
    exclude = exclusion_reasons(confirmed, clusters)
    assert exclude == {
        "w1": "quarantine d1 (by ana: junk)",
        "w7": "near_duplicate of quarantined w1",
        "x9": "exact_duplicate of quarantined w1",
    }
    assert set(exclusion_reasons(confirmed, None)) == {"w1"}
    stats = build_mixture([uri], str(tmp_path / "mix"), MixtureConfig(), exclude=exclude)
    kept = {
        r["id"]
        for split in ("train", "val")
        for r in storage.read_table(str(tmp_path / "mix" / f"{split}.parquet")).to_pylist()
    }
    assert kept == {f"w{i}" for i in range(40)} - {"w1", "w7"}
    report = stats.as_metadata()
    assert report["quarantined_docs"] == 2
    assert report["quarantine"]["not_in_documents"] == 1  # x9 was never in this corpus
    assert report["quarantine"]["excluded_by_reason"] == {
        "near_duplicate of a quarantined document": 1,
        "quarantine d1": 1,
    }
    audit = storage.read_table(str(tmp_path / "mix" / "quarantined.parquet")).to_pylist()
    assert sorted(r["id"] for r in audit) == ["w1", "w7"]
    assert build_mixture([uri], str(tmp_path / "m2"), MixtureConfig()).quarantine == {
        "enabled": False
    }


def test_bad_quarantine_config_says_how_to_fix() -> None:
    with pytest.raises(ConfigError, match="max_sequences"):
        QuarantineConfig(max_sequences=0)
    with pytest.raises(ConfigError, match="1 <= start < end"):
        SkipRecord(
            decision_id="d", branch="b", window=(5, 5), spike_step=5, packed_dir="p",
            plan=PLAN, healthy_checkpoint="c",
        )  # fmt: skip


def test_ledger_source_id_is_used_when_packed_with_provenance(tmp_path: Path) -> None:
    packed = tmp_path / "packed_tokens"
    make_window_packed(packed)
    ledger = pq.read_table(packed / "ledger.parquet")
    ids = [f"in-{d}" for d in ledger["doc_id"].to_pylist()]
    if "source_id" in ledger.column_names:  # the packer writes provenance now: replace it
        ledger = ledger.drop_columns(["source_id"])
    pq.write_table(ledger.append_column("source_id", pa.array(ids)), packed / "ledger.parquet")
    pieces = window_pieces(str(packed), PLAN, (1, 3))
    assert pieces.num_rows == 32
    assert pieces["source_id"].to_pylist() == [f"in-{d}" for d in pieces["doc_id"].to_pylist()]


@pytest.mark.slow
def test_after_checkpoint_delta_and_unscored_sequences(
    healthy_checkpoint: Path, tmp_path: Path
) -> None:
    packed = tmp_path / "packed_tokens"
    make_window_packed(packed)
    config = QuarantineConfig(max_sequences=4, batch_size=3, reference_sequences=8)
    docs = score_window(
        str(packed), PLAN, (1, 3), healthy_checkpoint=str(healthy_checkpoint),
        after_checkpoint=str(healthy_checkpoint), config=config,
    ).to_pylist()  # fmt: skip
    scored = [d for d in docs if d["scored_tokens"]]
    assert len(docs) == 32 and len(scored) == 8  # 4 sequences × 2 documents
    assert all(d["loss_after"] == pytest.approx(d["loss"]) for d in scored)
    assert all(d["loss_delta"] == pytest.approx(0.0, abs=1e-9) for d in scored)
    # a piece at the start of a sequence has no first target: HALF - 1 scored tokens
    assert {d["scored_tokens"] for d in scored} == {HALF - 1, SEQ_LEN - HALF}
    unscored = [d for d in docs if not d["scored_tokens"]]
    assert all(d["suspicion"] is None and d["loss"] is None for d in unscored)
