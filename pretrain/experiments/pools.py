"""Token pools: each shard group's documents tokenized once, for every experiment to share.

A pool is an ordinary packed-token directory (:mod:`pretrain.packing.format`) whose ``train``
split holds the documents of one source of one shard group in shuffled ``seq_len``-token
sequences; a shard group that mixes sources has one pool per source (``<group>/<source>/``).
Experiments never copy a pool: a data variant is a *view* that names ranges of pool files
(:mod:`pretrain.experiments.view`), so a hundred mixtures cost one tokenization::

    pools = build_pool(["art/deduped_shards/web-0003/documents.parquet"], "art/tokenizer",
                       "art/proxy_pools/web-0003", group="web-0003", seq_len=256,
                       exclude_ids=val_ids)     # the shared validation documents stay out
    read_pool("art/proxy_pools/web-0003")       # [PoolInfo(group, source, sequences, ...)]

Validation documents (the mixture's ``val.parquet``) are excluded, so every experiment is scored
on documents no proxy trained on.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pretrain import storage
from pretrain.errors import DataError
from pretrain.experiments.records import json_object, read_record
from pretrain.packing import PackingConfig, pack_tokens, read_packed_index

POOL_FILE = "pool.json"
_COLUMNS = ("id", "text", "source")


@dataclass(frozen=True, kw_only=True)
class PoolInfo:
    """One source of one shard group, tokenized (``name``: ``<group>/<source>``)."""

    group: str
    source: str
    documents: int
    excluded_documents: int  # validation documents left out
    sequences: int
    tokens: int
    seq_len: int
    tokenizer_sha256: str
    path: str

    @property
    def name(self) -> str:
        return f"{self.group}/{self.source}"

    def as_metadata(self) -> dict[str, Any]:
        return asdict(self)


def build_pool(
    document_uris: list[str],
    tokenizer_uri: str,
    out_dir: str,
    *,
    group: str,
    seq_len: int,
    seed: int = 0,
    exclude_ids: set[str] | frozenset[str] = frozenset(),
) -> list[PoolInfo]:
    """Tokenize the documents of one shard group, one pool per source (module docstring)."""
    tables = [storage.read_table(uri, columns=list(_COLUMNS)) for uri in document_uris]
    table = pa.concat_tables(tables) if tables else pa.table({c: [] for c in _COLUMNS})
    before = table.num_rows
    if exclude_ids:
        table = table.filter(pc.invert(pc.is_in(table["id"], pa.array(sorted(exclude_ids)))))
    if table.num_rows == 0:
        raise DataError(f"shard group {group!r} has no documents left for a token pool")
    excluded = before - table.num_rows
    pools = []
    for source in sorted(set(table["source"].to_pylist())):
        rows = table.filter(pc.equal(table["source"], source))
        where = storage.join(out_dir, source)
        train = rows.append_column("epoch", pa.array([0] * rows.num_rows, pa.int64()))
        with tempfile.TemporaryDirectory(prefix="pool-") as mix:
            storage.write_table(train, str(Path(mix) / "train.parquet"))
            storage.write_table(train.slice(0, 0), str(Path(mix) / "val.parquet"))
            try:
                pack_tokens(mix, tokenizer_uri, where, PackingConfig(seq_len=seq_len, seed=seed))
            except DataError as exc:  # e.g. less text than one sequence: that source is left out
                if "fewer than seq_len" not in str(exc):
                    raise DataError(f"shard group {group!r} ({source}): {exc}") from exc
                continue
        index = read_packed_index(where)
        sequences = sum(f.num_sequences for f in index.files("train"))
        pools.append(
            PoolInfo(
                group=group,
                source=source,
                documents=rows.num_rows,
                excluded_documents=excluded,
                sequences=sequences,
                tokens=sequences * seq_len,
                seq_len=seq_len,
                tokenizer_sha256=index.tokenizer_sha256,
                path=where,
            )  # fmt: skip
        )
    if not pools:
        raise DataError(f"shard group {group!r} holds less text than one {seq_len}-token sequence")
    storage.write_json([p.as_metadata() for p in pools], storage.join(out_dir, POOL_FILE))
    return pools


def read_pool(pool_dir: str) -> list[PoolInfo]:
    """The pools of one shard group (one per source)."""
    where = storage.join(pool_dir, POOL_FILE)
    if not storage.exists(where):
        raise DataError(f"{pool_dir} is not a token pool (no {POOL_FILE}); materialize it first")
    return read_record(where, _pool_record, "a token pool record")


def _pool_record(data: Any) -> list[PoolInfo]:
    if not isinstance(data, list):
        raise TypeError(f"a JSON {type(data).__name__}, not a list of pools")
    return [PoolInfo(**json_object(entry)) for entry in data]
