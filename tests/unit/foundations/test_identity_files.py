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


def test_a_look_prefetches_identities_and_leaves_a_bad_one_to_raise_where_asked(
    tmp_path: Path,
) -> None:
    """A first look reads thousands of identities at once (``Look.prefetch``); what it found
    is what one read at a time finds, a missing identity is None, and a file that is not an
    identity raises its DataError only when that output is asked for."""
    from pretrain.identity import IDENTITY_FILE, Identity, Look, compute, read, write

    dirs = [str(tmp_path / f"out-{i}") for i in range(40)]
    for i, d in enumerate(dirs[:30]):
        write(d, compute(f"stage-{i}", "v1", {"x": i}, []))
    (tmp_path / "out-30").mkdir()
    (tmp_path / "out-30" / IDENTITY_FILE).write_text("[1, 2]")  # not an identity
    look = Look()
    look.prefetch([*dirs, dirs[0]])
    assert look.reads == 39  # each once; the bad one not taken
    assert all(look.read(d) == read(d) for i, d in enumerate(dirs) if i != 30)
    assert isinstance(look.read(dirs[0]), Identity) and look.read(dirs[35]) is None
    with pytest.raises(DataError, match=r"out-30/_identity.json is not an identity record"):
        look.read(dirs[30])


def test_map_io_keeps_order_and_raises_as_a_loop_would() -> None:
    assert storage.map_io(lambda i: i * i, list(range(50))) == [i * i for i in range(50)]

    def fail_on_7(i: int) -> int:
        if i == 7:
            raise ValueError("seven")
        return i

    with pytest.raises(ValueError, match="seven"):
        storage.map_io(fail_on_7, list(range(20)))
