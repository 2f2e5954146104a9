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

A group under admission also gets a **floor** pool (``build_floor_pool``, ``<group>/_floor/``,
pool group ``floor:<group>``): its own documents with the words of each sentence shuffled
(:func:`shuffled_sentences`) -- its vocabulary without its language, the zero of the group's
relative value (:mod:`pretrain.experiments.admission`).
"""

from __future__ import annotations

import random
import re
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
FLOOR_DIR, FLOOR_PREFIX = "_floor", "floor:"
_COLUMNS = ("id", "text", "source")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


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
    floor: bool = False,
) -> list[PoolInfo]:
    """Tokenize the documents of one shard group, one pool per source (module docstring);
    ``floor``: the group's floor pool instead, its words shuffled, in ``out_dir/_floor``."""
    table = _documents(document_uris)
    if floor:
        shuffled = [shuffled_sentences(t, seed) for t in table["text"].to_pylist()]
        table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(shuffled))
        out_dir, group = floor_dir(out_dir), FLOOR_PREFIX + group
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


def _documents(document_uris: list[str]) -> pa.Table:
    """The ``id``, ``text`` and ``source`` of every document of ``document_uris``."""
    tables = [storage.read_table(uri, columns=list(_COLUMNS)) for uri in document_uris]
    return pa.concat_tables(tables) if tables else pa.table({c: [] for c in _COLUMNS})


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


def shuffled_sentences(text: str, seed: int) -> str:
    """``text`` with the words of each sentence (and of each line) shuffled, the sentence's
    final punctuation and the line breaks kept: the same words, the same lengths, no language.
    Deterministic in ``seed`` and the text."""
    rng = random.Random(f"{seed}:{len(text)}:{text[:64]}")
    lines = []
    for line in text.split("\n"):
        sentences = []
        for sentence in _SENTENCE.findall(line):
            stripped = sentence.strip()
            end = len(stripped) - len(stripped.rstrip(".!?"))
            words = stripped[: len(stripped) - end].split() if end else stripped.split()
            rng.shuffle(words)
            if words:
                sentences.append(" ".join(words) + (stripped[-end:] if end else ""))
        lines.append(" ".join(sentences))
    return "\n".join(lines)


def build_floor_pool(
    document_uris: list[str], tokenizer_uri: str, out_dir: str, **settings: Any
) -> list[PoolInfo]:
    """The floor pool of ``group`` in ``out_dir/_floor`` (module docstring): :func:`build_pool`
    with ``floor=True`` and the same keywords."""
    return build_pool(document_uris, tokenizer_uri, out_dir, floor=True, **settings)


def floor_dir(pool_dir: str) -> str:
    """Where the floor pool of the group pooled in ``pool_dir`` lies."""
    return storage.join(pool_dir, FLOOR_DIR)
