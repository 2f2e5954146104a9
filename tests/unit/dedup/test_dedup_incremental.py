"""Incremental dedup, band partitions and bad input.

- a new shard is decided against documents kept earlier (they win even at lower quality);
- rerunning with nothing new is byte-identical; a re-materialized shard that changes another
  shard's outcome is written to ``changes.parquet``;
- many small band partitions give byte-identical clusters to one big one;
- empty, blank, null and one-word documents never crash and cluster deterministically.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import compute_signatures

WORDS = ("harbour tide lantern copper meadow violin orchard glacier pepper saddle thunder "
         "marble quiet ribbon canyon falcon ember willow").split()  # fmt: skip


def _text(seed: int, length: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(f"{rng.choice(WORDS)}{rng.randrange(50)}" for _ in range(length))


def _doc(text: str | None, url: str, quality: float = 0.5) -> dict:
    return {"id": doc_id(text or "", "web", url), "text": text, "source": "web", "url": url,
            "num_chars": len(text or ""), "quality_score": quality}  # fmt: skip


def _shard(tmp: Path, name: str, docs: list[dict], config: DedupConfig) -> str:
    uri = str(tmp / "docs" / name / "documents.parquet")
    storage.write_table(documents_table(docs), uri)
    sig = str(tmp / "sig" / name / "signatures.parquet")
    compute_signatures(uri, sig, config)
    return sig


def _rows(folder: Path, name: str = "clusters.parquet") -> dict[str, dict]:
    return {r["id"]: r for r in pq.read_table(folder / name).to_pylist()}


def test_new_shard_is_decided_against_kept_documents(tmp_path: Path) -> None:
    config = DedupConfig()
    original = _doc(_text(1), "a/1", quality=0.2)
    shard_a = [original, _doc(_text(2), "a/2"), _doc(_text(3), "a/3")]
    sig_a = _shard(tmp_path, "a", shard_a, config)
    out = tmp_path / "clusters"
    first = cluster_duplicates([sig_a], str(out), config)
    assert (first.removed, first.fresh_shards) == (0, 1)

    better_copy = _doc(_text(1), "b/1", quality=0.9)  # exact copy, higher quality
    sig_b = _shard(tmp_path, "b", [better_copy, _doc(_text(4), "b/2")], config)
    second = cluster_duplicates([sig_a, sig_b], str(out), config)
    assert (second.committed_shards, second.fresh_shards, second.survivor_changes) == (1, 1, 0)
    rows = _rows(out)
    assert rows[better_copy["id"]]["survivor_id"] == original["id"]  # the kept one stays
    assert rows[better_copy["id"]]["reason"] == "exact_duplicate"
    # Without incremental mode the better copy would have won.
    full = cluster_duplicates(
        [sig_a, sig_b], str(tmp_path / "full"), DedupConfig(incremental=False)
    )
    assert (
        full.removed == 1
        and _rows(tmp_path / "full")[original["id"]]["survivor_id"] == better_copy["id"]
    )

    before = (out / "clusters.parquet").read_bytes()
    again = cluster_duplicates([sig_b, sig_a], str(out), config)
    assert (again.fresh_shards, again.survivor_changes) == (0, 0)
    assert (out / "clusters.parquet").read_bytes() == before

    # Shard a is re-materialized without the original: b's copy is reopened, kept, recorded.
    _shard(tmp_path, "a", shard_a[1:], config)
    third = cluster_duplicates([sig_a, sig_b], str(out), config)
    assert (third.committed_shards, third.fresh_shards, third.removed) == (1, 1, 0)
    changes = pq.read_table(out / "changes.parquet").to_pylist()
    assert changes == [{"id": better_copy["id"], "shard": sig_b,
                        "old_survivor_id": original["id"], "new_survivor_id": None}]  # fmt: skip


def test_band_partitions_change_nothing(tmp_path: Path) -> None:
    docs = [_doc(_text(i), f"https://d.example/{i}") for i in range(40)]
    near = _text(5).split(" ")
    near[60] = "edited"
    docs += [_doc(" ".join(near), "d/near"), _doc(_text(7), "d/copy")]
    docs.append(_doc(_text(99), "https://d.example/9/#top"))  # same page as doc 9, new text
    sigs = [
        _shard(tmp_path, "s1", docs[:20], DedupConfig()),
        _shard(tmp_path, "s2", docs[20:], DedupConfig()),
    ]
    one = cluster_duplicates(sigs, str(tmp_path / "one"), DedupConfig())
    many = cluster_duplicates(sigs, str(tmp_path / "many"), DedupConfig(max_partition_rows=16))
    assert one.partitions == 16 and many.partitions == 16 * 3
    assert many.peak_partition_rows < one.peak_partition_rows
    assert (one.removed_exact, one.removed_url, one.removed_near) == (1, 1, 1)
    assert (tmp_path / "one" / "clusters.parquet").read_bytes() == (
        tmp_path / "many" / "clusters.parquet"
    ).read_bytes()


def test_empty_and_short_documents_are_deterministic(tmp_path: Path) -> None:
    texts = ["", "   \n\t ", None, "hello", "Hello", "hello world", "hello there", "中", "ok."]
    docs = [_doc(t, f"bad/{i}") for i, t in enumerate(texts)]
    runs = []
    for run in ("r1", "r2"):
        sig = _shard(tmp_path, "s", docs, DedupConfig())  # same input path, written twice
        stats = cluster_duplicates([sig], str(tmp_path / run / "clusters"), DedupConfig())
        runs.append((tmp_path / run / "clusters" / "clusters.parquet").read_bytes())
    assert runs[0] == runs[1]
    rows = _rows(tmp_path / "r1" / "clusters")
    # Empty, blank and null texts normalize to "" (one exact cluster); "hello" == "Hello".
    assert stats.removed_exact == 3 and stats.removed_near == 0 and stats.clusters == 2
    assert {rows[d["id"]]["reason"] for d in docs[:3]} == {"survivor", "exact_duplicate"}
    assert docs[5]["id"] not in rows and docs[6]["id"] not in rows
    sig_table = pq.read_table(tmp_path / "sig" / "s" / "signatures.parquet")
    assert sig_table.num_rows == len(texts)
