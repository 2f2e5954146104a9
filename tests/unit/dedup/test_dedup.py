"""MinHash signatures, LSH clusters and applying them, with planted duplicates in real text.

The base documents are standard-library modules of the running Python (always installed),
so these tests need no shared data.
"""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from datasketch import MinHash

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.dedup import jaccard
from pretrain.dedup.apply import apply_dedup
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.jaccard import pair_chunks, read_rows
from pretrain.dedup.minhash import compute_signatures, signatures
from pretrain.dedup.shingles import batch_shingles, jaccard_pairs
from pretrain.errors import ConfigError, DataError

MODULES_A = ["argparse.py", "base64.py", "calendar.py", "difflib.py", "fractions.py", "gettext.py"]
MODULES_B = ["heapq.py", "netrc.py", "pprint.py", "shlex.py", "statistics.py", "textwrap.py"]
UNRELATED = (
    "A lighthouse keeper writes the weather in a notebook every evening: wind, rain, the "
    "colour of the sea and the ships that passed the point during the day."
)


def _stdlib_doc(name: str, *, quality: float = 0.5, url: str | None = None) -> dict:
    text = (Path(sysconfig.get_paths()["stdlib"]) / name).read_text(encoding="utf-8")
    return _doc(text, url or f"stdlib/{name}", quality)


def _doc(text: str, url: str, quality: float) -> dict:
    return {"id": doc_id(text, "code", url), "text": text, "source": "code", "url": url,
            "num_chars": len(text), "quality_score": quality}  # fmt: skip


def _edit_words(text: str, every: int) -> str:
    """Replace every ``every``-th word: a near duplicate with a few words changed."""
    words = text.split(" ")
    for i in range(every, len(words), every):
        words[i] = f"changed{i}"
    return " ".join(words)


@pytest.fixture
def planted(tmp_path: Path) -> dict:
    shard_a = [_stdlib_doc(m) for m in MODULES_A]
    shard_b = [_stdlib_doc(m) for m in MODULES_B]
    exact_copy = _doc(shard_a[0]["text"], "mirror/argparse.py", 0.9)  # better quality: survives
    near_copy = _doc(_edit_words(shard_a[3]["text"], 400), "fork/difflib.py", 0.5)
    near_in_b = _doc(_edit_words(shard_b[4]["text"], 500), "fork/statistics.py", 0.5)
    shard_b += [exact_copy, near_copy, near_in_b, _doc(UNRELATED, "notes.txt", 0.5)]
    uris = {}
    for name, docs in (("a", shard_a), ("b", shard_b)):
        uris[name] = str(tmp_path / "filtered" / name / "documents.parquet")
        storage.write_table(documents_table(docs), uris[name])
    return {
        "uris": uris,
        "tmp": tmp_path,
        "exact": (exact_copy["id"], shard_a[0]["id"]),
        "near": sorted([near_copy["id"], shard_a[3]["id"]]),
        "near_b": sorted([near_in_b["id"], shard_b[4]["id"]]),
        "unrelated": shard_b[-1]["id"],
    }


def test_signatures_match_datasketch() -> None:
    config = DedupConfig()
    texts = [UNRELATED, "short text", "", (UNRELATED + " ") * 3, "中文评论很好很好吃"]
    batch = batch_shingles(texts, config)
    assert batch.counts.tolist() == [len(UNRELATED.split()) - 4, 1, 0, 28, 5]
    assert batch.char_shingled.tolist() == [False, False, False, False, True]
    ours = signatures(batch.hashes, batch.owner, len(texts), config)
    for hashes, row in zip(batch.per_document(), ours, strict=True):
        reference = MinHash(num_perm=112, seed=1, scheme="affine32", hashfunc=int)
        reference.update_batch(hashes.tolist())
        assert np.array_equal(reference.hashvalues, row)


def test_dedup_config_validation() -> None:
    assert DedupConfig().band_rows == (14, 8)
    bands, rows = DedupConfig(bands=None, rows=None, threshold=0.8).band_rows
    assert bands * rows <= 112 and rows > 1
    with pytest.raises(ConfigError, match="num_perm"):
        DedupConfig(bands=10, rows=10)
    with pytest.raises(ConfigError, match="both"):
        DedupConfig(bands=None)


def test_planted_duplicates_are_exactly_the_ones_removed(planted: dict) -> None:
    config = DedupConfig()
    tmp: Path = planted["tmp"]
    sig_uris = []
    for name, uri in planted["uris"].items():
        sig_uri = str(tmp / "sig" / name / "signatures.parquet")
        stats = compute_signatures(uri, sig_uri, config)
        assert stats.empty == 0 and stats.shingles > 1000
        sig_uris.append(sig_uri)
    sig = pq.read_table(sig_uris[1])
    assert sig.schema.field("band_13").type == "uint64"
    assert len(sig.column("minhash")[0].as_py()) == 112

    stats = cluster_duplicates(sig_uris, str(tmp / "clusters"), config)
    assert (stats.removed_exact, stats.removed_near, stats.clusters) == (1, 2, 3)
    assert stats.documents == 16 and stats.cluster_sizes == {2: 3}
    rows = pq.read_table(tmp / "clusters" / "clusters.parquet").to_pylist()
    by_id = {r["id"]: r for r in rows}
    exact_copy, exact_original = planted["exact"]
    assert by_id[exact_original]["reason"] == "exact_duplicate"
    assert by_id[exact_original]["survivor_id"] == exact_copy  # higher quality_score wins
    for smaller, larger in (planted["near"], planted["near_b"]):
        assert by_id[larger] == {
            **by_id[larger],
            "reason": "near_duplicate",
            "survivor_id": smaller,
        }
    assert planted["unrelated"] not in by_id
    assert len(rows) == 6

    # Shard order does not change the result, byte for byte.
    first = (tmp / "clusters" / "clusters.parquet").read_bytes()
    cluster_duplicates(sig_uris[::-1], str(tmp / "clusters2"), config)
    assert (tmp / "clusters2" / "clusters.parquet").read_bytes() == first
    assert json.loads((tmp / "clusters" / "stats.json").read_text())["removed"] == 3

    removed_ids = {exact_original, planted["near"][1], planted["near_b"][1]}
    total_kept = 0
    for name, uri in planted["uris"].items():
        out = tmp / "deduped" / name
        applied = apply_dedup(uri, str(tmp / "clusters" / "clusters.parquet"), str(out))
        assert applied.documents_in == applied.kept + sum(applied.removed.values())
        kept_ids = set(pq.read_table(out / "documents.parquet").column("id").to_pylist())
        rejects = pq.read_table(out / "rejects.parquet").to_pylist()
        assert kept_ids.isdisjoint(removed_ids)
        assert all(
            r["stage"] == "dedup" and r["detail"] == by_id[r["id"]]["survivor_id"] for r in rejects
        )
        assert {r["id"] for r in rejects} <= removed_ids
        total_kept += applied.kept
    assert total_kept == 16 - 3


def test_bounded_verification_gives_the_same_clusters(
    planted: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Verifying 2 documents at a time changes nothing in the output."""
    tmp: Path = planted["tmp"]
    sig_uris = []
    for name, uri in planted["uris"].items():
        sig_uris.append(str(tmp / "sig" / name / "signatures.parquet"))
        compute_signatures(uri, sig_uris[-1], DedupConfig())
    for verify in ("jaccard", "signature"):
        out = tmp / f"clusters_{verify}"
        cluster_duplicates(sig_uris, str(out), DedupConfig(verify=verify))
        expected = (out / "clusters.parquet").read_bytes()
        with monkeypatch.context() as patch:
            patch.setattr(jaccard, "pair_chunks", lambda pairs, _: pair_chunks(pairs, 2))
            config = DedupConfig(verify=verify, max_partition_rows=16)
            stats = cluster_duplicates(sig_uris, str(out / "small"), config)
        assert stats.verified_pairs == 2 and stats.candidate_pairs >= 2  # >= 2 chunks
        assert (out / "small" / "clusters.parquet").read_bytes() == expected


def test_pair_chunks_jaccard_slices_and_row_reads(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pairs = np.unique(np.sort(rng.integers(0, 60, (300, 2)), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    chunks = list(pair_chunks(pairs, 7))
    assert all(len(np.unique(c)) <= 7 for c in chunks) and len(chunks) > 1
    assert np.array_equal(np.concatenate(chunks), pairs)

    texts = [" ".join(f"w{(i * 7 + j) % 40}" for j in range(30 + i)) for i in range(20)]
    batch = batch_shingles(texts, DedupConfig())
    left, right = rng.integers(0, 20, 50), rng.integers(0, 20, 50)
    whole = jaccard_pairs(batch, left, right)
    assert np.array_equal(jaccard_pairs(batch, left, right, max_keys=10), whole)

    uri = str(tmp_path / "t.parquet")
    docs = [_doc(f"text {i}", f"u{i}", 0.5) for i in range(50)]
    storage.write_table(documents_table(docs), uri, row_group_size=8)
    rows = np.array([0, 3, 8, 9, 10, 31, 49])
    got = list(read_rows(uri, rows, ["id"], batch_rows=2))
    assert np.array_equal(np.concatenate([w for w, _ in got]), rows)
    ids = [i for _, t in got for i in t.column("id").to_pylist()]
    assert ids == [docs[i]["id"] for i in rows]
    assert all(len(w) <= 2 for w, _ in got)


def test_mismatched_signature_params_fail_loudly(planted: dict) -> None:
    tmp: Path = planted["tmp"]
    uri = str(tmp / "sig.parquet")
    compute_signatures(planted["uris"]["a"], uri, DedupConfig(seed=2))
    with pytest.raises(DataError, match="recompute"):
        cluster_duplicates([uri], str(tmp / "c"), DedupConfig())
