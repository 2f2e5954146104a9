"""Stale inputs are refused (issue 19, item 11): signatures computed from an earlier version of
their documents stop the dedup clustering with a message that names them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import compute_signatures
from pretrain.errors import DataError
from pretrain.identity import check_inputs, file_identity, stale_inputs

WORDS = "river castle engine orchard glacier lantern meadow harbor violin compass".split()


def _documents(uri: str, n: int, salt: str) -> None:
    texts = [
        " ".join(WORDS[(i + k) % len(WORDS)] for k in range(40)) + f" {salt} {i}" for i in range(n)
    ]
    rows = [{"id": doc_id(t, "web", f"u{i}"), "text": t, "source": "web", "url": f"u{i}",
             "num_chars": len(t)} for i, t in enumerate(texts)]  # fmt: skip
    storage.write_table(documents_table(rows), uri)


def test_file_identity_follows_content(tmp_path: Path) -> None:
    uri = str(tmp_path / "d.parquet")
    _documents(uri, 5, "a")
    first = file_identity(uri)
    assert file_identity(uri) == first and stale_inputs({uri: first}) == []
    _documents(uri, 5, "b")
    assert file_identity(uri) != first and stale_inputs({uri: first}) == [uri]
    with pytest.raises(DataError, match=r"out\[x\] is stale: .*d\.parquet; rebuild it"):
        check_inputs({uri: first}, output="out[x]", rebuild="rebuild it")
    (tmp_path / "d.parquet").unlink()
    assert stale_inputs({uri: first}) == [uri]


def test_dedup_refuses_signatures_of_rematerialized_documents(tmp_path: Path) -> None:
    config = DedupConfig()
    sigs = []
    for shard in ("s0", "s1"):
        docs = str(tmp_path / "filtered" / shard / "documents.parquet")
        _documents(docs, 8, shard)
        sigs.append(str(tmp_path / "sig" / shard / "signatures.parquet"))
        compute_signatures(docs, sigs[-1], config)
    cluster_duplicates(sigs, str(tmp_path / "clusters"), config)  # current: accepted
    _documents(str(tmp_path / "filtered" / "s1" / "documents.parquet"), 12, "new")
    with pytest.raises(DataError, match=r"1 signature file\(s\) .*sig/s1/signatures\.parquet "
                       r"\(from .*filtered/s1/documents\.parquet\).*minhash_signatures"):  # fmt: skip
        cluster_duplicates(sigs, str(tmp_path / "clusters2"), config)
    compute_signatures(str(tmp_path / "filtered" / "s1" / "documents.parquet"), sigs[1], config)
    stats = cluster_duplicates(sigs, str(tmp_path / "clusters2"), config)
    assert stats.documents == 20
