"""Tokenize the mixture and pack it into fixed-length token shards, an index and a ledger.

Every document is encoded, followed by EOS, and concatenated; the stream is cut into
``seq_len``-token sequences (the last partial sequence is dropped and counted). Train
sequences from all sources are shuffled with ``seed``; validation is packed per source, in
order, so evaluation per source is exact.

Usage::

    from pretrain.packing import PackedTokens, PackingConfig, pack_tokens
    stats = pack_tokens("art/data_mixture", "art/tokenizer", "art/packed_tokens",
                        PackingConfig(seq_len=2048))
    packed = PackedTokens("art/packed_tokens")      # refuses an uncommitted dir
    batch = packed.split("train")[step * B : (step + 1) * B]   # (B, seq_len)

On-disk contract (read by the trainer), under the output dir:

- ``train-00000.bin``, ``val-<source>-00000.bin``: raw little-endian uint16 (vocab < 65536)
  or uint32, shape ``(num_sequences, seq_len)`` row-major, split at ``shard_bytes``.
- ``index.json``: format 1, seq_len, vocab_size, dtype, eos/bos/pad ids, tokenizer_sha256,
  ``splits.{train,val}.files[{file, num_sequences, source}]``, documents, tokens_tokenized.
- ``ledger.parquet``: for every packed sequence (train index = the order the trainer reads)
  the document pieces in it: seq_index, doc_id, source, epoch, token_start, token_end
  (offsets in the sequence), doc_token_offset, split. A loss spike at step S with batch B is
  traced with ``seq_index in [S*B, (S+1)*B)`` and ``split == "train"``.
- ``_COMMITTED``: written last.

Tokenization runs in this process; ``encode_batch`` parallelizes over ``tokenizers``' own
thread pool (size it with ``RAYON_NUM_THREADS``). Sharding the input over several processes
is future work. The output is byte-identical for the same inputs and config.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from pretrain import storage
from pretrain.errors import ConfigError, DataError
from pretrain.tokenizer import load_tokenizer, special_ids, tokenizer_file

FORMAT = 1


@dataclass(frozen=True, kw_only=True)
class PackingConfig:
    """Sequence length, shuffle seed, encode batch size and shard file size."""

    seq_len: int = 256
    seed: int = 0
    batch_size: int = 512  # documents per encode_batch call
    shard_bytes: int = 64 * 2**20

    def __post_init__(self) -> None:
        if self.seq_len < 2:
            raise ConfigError(f"PackingConfig.seq_len={self.seq_len} must be >= 2, e.g. 2048")
        if self.batch_size < 1:
            raise ConfigError("PackingConfig.batch_size must be >= 1 (documents per batch)")
        if self.shard_bytes < 1:
            raise ConfigError("PackingConfig.shard_bytes must be > 0, e.g. 64 * 2**20")


@dataclass(frozen=True, kw_only=True)
class PackingStats:
    seq_len: int
    vocab_size: int
    dtype: str
    documents: dict[str, int]
    sequences: dict[str, int]
    tokens_tokenized: int
    tokens_packed: int
    tail_tokens_dropped: int
    split_tokens: dict[str, dict[str, int]]  # split -> tokenized / packed / tail_dropped
    tokens_per_source: dict[str, dict[str, int]]  # source -> split -> tokens tokenized
    docs_with_special_text: int
    warnings: tuple[str, ...] = field(default=())

    def as_metadata(self) -> dict:
        flat = {k: v for k, v in asdict(self).items() if k not in ("documents", "sequences")}
        for split in ("train", "val"):
            flat[f"{split}_documents"] = self.documents[split]
            flat[f"{split}_sequences"] = self.sequences[split]
        return {**flat, "warnings": "\n".join(self.warnings)}


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab < 65536), else uint32; always little-endian."""
    if vocab_size < 2**16:
        return np.dtype("<u2")
    if vocab_size < 2**32:
        return np.dtype("<u4")
    raise ConfigError(f"vocab_size={vocab_size} does not fit uint32 token ids")


@dataclass(eq=False)
class _Stream:
    """One token stream being written to a scratch file, with its document boundaries."""

    path: Path
    dtype: np.dtype
    num_tokens: int = 0
    docs: list[tuple[str, str, int, int]] = field(default_factory=list)  # id, source, epoch, n

    def append(self, tokens: np.ndarray, docs: list[tuple[str, str, int, int]]) -> None:
        with open(self.path, "ab") as f:
            f.write(tokens.astype(self.dtype, copy=False).tobytes())
        self.num_tokens += len(tokens)
        self.docs += docs

    @property
    def lengths(self) -> list[int]:
        return [n for *_, n in self.docs]

    def sequences(self, seq_len: int) -> np.ndarray:
        n = self.num_tokens // seq_len
        if n == 0:
            return np.empty((0, seq_len), self.dtype)
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(n, seq_len))


def _encode(tok, texts: list[str], eos_id: int, dtype: np.dtype) -> tuple[np.ndarray, list[int]]:
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    lengths = [len(e.ids) + 1 for e in encodings]
    flat = np.empty(sum(lengths), dtype=dtype)
    offset = 0
    for enc, n in zip(encodings, lengths, strict=True):
        flat[offset : offset + n - 1] = enc.ids
        flat[offset + n - 1] = eos_id
        offset += n
    return flat, lengths


def _tokenize_split(
    uri: str, stream_for, tok, eos_id: int, dtype: np.dtype, config: PackingConfig, specials
) -> tuple[int, int]:
    """Encode every document of ``uri`` into its stream; return (documents, special-text docs)."""
    num_docs = special_docs = 0
    for batch in storage.iter_table_batches(uri, batch_size=config.batch_size):
        cols = batch.to_pydict()
        texts, ids, sources = cols["text"], cols["id"], cols["source"]
        epochs = cols.get("epoch") or [0] * len(texts)
        num_docs += len(texts)
        special_docs += sum(any(s in t for s in specials) for t in texts)
        flat, lengths = _encode(tok, texts, eos_id, dtype)
        ends = np.cumsum(lengths)
        groups: dict[_Stream, list[int]] = {}  # rows keep their order within a stream
        for row, source in enumerate(sources):
            groups.setdefault(stream_for(source), []).append(row)
        for stream, rows in groups.items():
            tokens = np.concatenate([flat[ends[r] - lengths[r] : ends[r]] for r in rows])
            stream.append(tokens, [(ids[r], sources[r], epochs[r], lengths[r]) for r in rows])
    return num_docs, special_docs


def _pieces(lengths: list[int], seq_len: int, num_sequences: int) -> dict[str, np.ndarray]:
    """Document pieces per packed sequence (documents entirely in the dropped tail omitted)."""
    sizes = np.asarray(lengths, dtype=np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    packed_end = num_sequences * seq_len
    doc = np.nonzero(starts < packed_end)[0]
    first_tok, last_tok = starts[doc], np.minimum(ends[doc], packed_end)
    first_seq, last_seq = first_tok // seq_len, (last_tok - 1) // seq_len
    counts = last_seq - first_seq + 1
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    seq = np.repeat(first_seq, counts) + within
    lo = np.maximum(np.repeat(first_tok, counts), seq * seq_len)
    hi = np.minimum(np.repeat(last_tok, counts), (seq + 1) * seq_len)
    doc_rep = np.repeat(doc, counts)
    return {
        "doc": doc_rep,
        "seq": seq,
        "token_start": lo - seq * seq_len,
        "token_end": hi - seq * seq_len,
        "doc_token_offset": lo - starts[doc_rep],
    }


def _ledger_table(stream: _Stream, pieces: dict, seq_index: np.ndarray, split: str) -> pa.Table:
    order = np.lexsort((pieces["token_start"], seq_index))
    doc = pieces["doc"][order]
    return pa.table(
        {
            "seq_index": pa.array(seq_index[order], pa.int64()),
            "doc_id": pa.array([stream.docs[i][0] for i in doc], pa.string()),
            "source": pa.array([stream.docs[i][1] for i in doc], pa.string()),
            "epoch": pa.array([stream.docs[i][2] for i in doc], pa.int32()),
            "token_start": pa.array(pieces["token_start"][order], pa.int32()),
            "token_end": pa.array(pieces["token_end"][order], pa.int32()),
            "doc_token_offset": pa.array(pieces["doc_token_offset"][order], pa.int64()),
            "split": pa.array([split] * len(order), pa.string()),
        }
    )


def _write_shards(rows: np.ndarray, order: np.ndarray, prefix: str, out: str, rows_per: int):
    """Write ``rows[order]`` in shards; return the index entries."""
    entries = []
    for shard, lo in enumerate(range(0, max(len(order), 1), rows_per)):
        part = rows[order[lo : lo + rows_per]] if len(order) else rows[:0]
        name = f"{prefix}-{shard:05d}.bin"
        storage.write_bytes(np.ascontiguousarray(part).tobytes(), storage.join(out, name))
        entries.append({"file": name, "num_sequences": int(len(part))})
    return entries


def _write_split(
    stream: _Stream, order: np.ndarray, prefix: str, source, out: str, seq_len: int, rows_per: int
) -> tuple[list[dict], pa.Table]:
    """Write one stream's sequences in ``order``; return index entries and its ledger."""
    rows = stream.sequences(seq_len)
    entries = [{**e, "source": source} for e in _write_shards(rows, order, prefix, out, rows_per)]
    position = np.empty_like(order)
    position[order] = np.arange(len(order))  # original sequence -> index the trainer reads
    pieces = _pieces(stream.lengths, seq_len, len(rows))
    split = "train" if source is None else "val"
    return entries, _ledger_table(stream, pieces, position[pieces["seq"]], split)


def pack_tokens(
    mixture_dir_uri: str, tokenizer_uri: str, output_dir_uri: str, config: PackingConfig
) -> PackingStats:
    """Tokenize train.parquet/val.parquet and write shards, index.json, ledger.parquet."""
    tok_file = tokenizer_file(tokenizer_uri)
    tok = load_tokenizer(tok_file)
    ids = special_ids(tok)
    vocab_size = tok.get_vocab_size()
    dtype = token_dtype(vocab_size)
    specials = [t.content for t in tok.get_added_tokens_decoder().values() if t.special]
    train_uri = storage.join(mixture_dir_uri, "train.parquet")
    val_uri = storage.join(mixture_dir_uri, "val.parquet")
    if storage.is_committed(output_dir_uri):  # a crash mid-rewrite must not look complete
        fs, path = storage.filesystem(storage.join(output_dir_uri, storage.COMMITTED))
        fs.delete_file(path)
    storage.makedirs(output_dir_uri)
    scratch_root = None if storage.is_s3(output_dir_uri) else storage.local_path(output_dir_uri)
    with tempfile.TemporaryDirectory(prefix=".scratch-", dir=scratch_root) as scratch:
        train = _Stream(path=Path(scratch) / "train.tokens", dtype=dtype)
        val: dict[str, _Stream] = {}

        def val_stream(source: str) -> _Stream:
            if source not in val:
                val[source] = _Stream(path=Path(scratch) / f"val-{len(val)}.tokens", dtype=dtype)
            return val[source]

        args = (tok, ids["eos"], dtype, config, specials)
        train_docs, special_train = _tokenize_split(train_uri, lambda _: train, *args)
        val_docs, special_val = _tokenize_split(val_uri, val_stream, *args)
        return _write_packed(
            output_dir_uri,
            config,
            train=train,
            val=dict(sorted(val.items())),
            documents={"train": train_docs, "val": val_docs},
            header={
                **{"format": FORMAT, "seq_len": config.seq_len, "vocab_size": vocab_size},
                **{"dtype": dtype.name, **{f"{k}_id": v for k, v in ids.items()}},
                "tokenizer_sha256": hashlib.sha256(storage.read_bytes(tok_file)).hexdigest(),
            },
            docs_with_special_text=special_train + special_val,
        )


def _write_packed(
    out: str,
    config: PackingConfig,
    *,
    train: _Stream,
    val: dict[str, _Stream],
    documents: dict[str, int],
    header: dict,
    docs_with_special_text: int,
) -> PackingStats:
    seq_len = config.seq_len
    rows_per = max(1, config.shard_bytes // (seq_len * train.dtype.itemsize))
    train_rows = train.sequences(seq_len)
    if len(train_rows) == 0:
        raise DataError(
            f"train split has {train.num_tokens} tokens, fewer than seq_len={seq_len}; "
            "lower seq_len or add data"
        )
    order = np.random.default_rng(config.seed).permutation(len(train_rows))
    train_files, train_ledger = _write_split(train, order, "train", None, out, seq_len, rows_per)
    files, ledgers, warnings = {"train": train_files, "val": []}, [train_ledger], []
    tags = {s: re.sub(r"[^A-Za-z0-9_.-]", "_", s) for s in val}
    if len(set(tags.values())) != len(val):
        raise DataError(f"val source names collide after sanitizing for file names: {list(val)}")
    for source, stream in val.items():
        if stream.num_tokens < seq_len:
            warnings.append(
                f"val source '{source}' has {stream.num_tokens} tokens < seq_len={seq_len}: "
                "no val sequences; raise val_fraction or lower seq_len"
            )
        order = np.arange(stream.num_tokens // seq_len)
        prefix = f"val-{tags[source]}"
        entries, ledger = _write_split(stream, order, prefix, source, out, seq_len, rows_per)
        files["val"] += entries
        ledgers.append(ledger)
    num_seq = {k: sum(e["num_sequences"] for e in v) for k, v in files.items()}
    split_tokens: dict[str, dict[str, int]] = {}
    per_source: dict[str, dict[str, int]] = {}
    for split, streams in (("train", [train]), ("val", list(val.values()))):
        tokenized, packed = sum(s.num_tokens for s in streams), num_seq[split] * seq_len
        tail = sum(s.num_tokens % seq_len for s in streams)
        split_tokens[split] = {"tokenized": tokenized, "packed": packed, "tail_dropped": tail}
        assert tokenized == packed + tail, f"{split}: tokens lost in packing"
        for stream in streams:
            for _, source, _, n in stream.docs:
                per_source.setdefault(source, {"train": 0, "val": 0})[split] += n
    if docs_with_special_text:
        warnings.append(
            f"{docs_with_special_text} documents contain special-token text (e.g. an EOS "
            "string); it was encoded as the special token"
        )
    stats = PackingStats(
        seq_len=seq_len,
        vocab_size=header["vocab_size"],
        dtype=header["dtype"],
        documents=documents,
        sequences=num_seq,
        tokens_tokenized=sum(t["tokenized"] for t in split_tokens.values()),
        tokens_packed=sum(t["packed"] for t in split_tokens.values()),
        tail_tokens_dropped=sum(t["tail_dropped"] for t in split_tokens.values()),
        split_tokens=split_tokens,
        tokens_per_source=dict(sorted(per_source.items())),
        docs_with_special_text=docs_with_special_text,
        warnings=tuple(warnings),
    )
    index = {
        **header,
        "seed": config.seed,
        "splits": {
            k: {"files": v, "num_sequences": num_seq[k], "num_tokens": num_seq[k] * seq_len}
            for k, v in files.items()
        },
        "documents": documents,
        "tokens_tokenized": stats.tokens_tokenized,
        "split_tokens": split_tokens,
        "tokens_per_source": stats.tokens_per_source,
    }
    storage.write_table(pa.concat_tables(ledgers), storage.join(out, "ledger.parquet"))
    storage.write_json(index, storage.join(out, "index.json"))
    storage.commit_marker(out, {"format": FORMAT, "tokenizer_sha256": header["tokenizer_sha256"]})
    return stats


class PackedTokens:
    """Memory-mapped reader of a committed packed_tokens directory (local paths only)."""

    def __init__(self, dir_path: str | Path) -> None:
        self.path = storage.local_path(str(dir_path))
        if not storage.is_committed(str(self.path)):
            raise DataError(
                f"{self.path} has no {storage.COMMITTED} marker: packing did not finish"
            )
        self.index = storage.read_json(str(self.path / "index.json"))
        if self.index.get("format") != FORMAT:
            raise DataError(f"{self.path}: index format {self.index.get('format')} != {FORMAT}")
        self.seq_len: int = self.index["seq_len"]
        self.vocab_size: int = self.index["vocab_size"]
        self.eos_id: int = self.index["eos_id"]
        self.bos_id: int = self.index["bos_id"]
        self.pad_id: int = self.index["pad_id"]
        self.dtype = np.dtype(self.index["dtype"]).newbyteorder("<")

    def _entries(self, split: str) -> list[dict]:
        if split not in self.index["splits"]:
            raise DataError(f"no split '{split}' in {self.path}; have {list(self.index['splits'])}")
        return self.index["splits"][split]["files"]

    def _open(self, entry: dict) -> np.ndarray:
        file, n = self.path / entry["file"], entry["num_sequences"]
        expected = n * self.seq_len * self.dtype.itemsize
        if not file.exists() or file.stat().st_size != expected:
            raise DataError(f"{file} is missing or not {expected} bytes as index.json says")
        if n == 0:
            return np.empty((0, self.seq_len), self.dtype)
        return np.memmap(file, dtype=self.dtype, mode="r", shape=(n, self.seq_len))

    def split_shards(self, split: str) -> list[np.ndarray]:
        """One memmap per shard file, in order (lazy: nothing is read until indexed)."""
        return [self._open(e) for e in self._entries(split)]

    def split(self, split: str) -> np.ndarray:
        """All sequences of ``split``, shape (N, seq_len); a memmap when it is one file."""
        shards = self.split_shards(split)
        return shards[0] if len(shards) == 1 else np.concatenate(shards)

    def val_by_source(self) -> dict[str, np.ndarray]:
        by_source: dict[str, list[np.ndarray]] = {}
        for entry in self._entries("val"):
            by_source.setdefault(entry["source"], []).append(self._open(entry))
        return {s: a[0] if len(a) == 1 else np.concatenate(a) for s, a in by_source.items()}

    def num_sequences(self, split: str) -> int:
        self._entries(split)
        return int(self.index["splits"][split]["num_sequences"])

    def ledger(self) -> pa.Table:
        return storage.read_table(str(self.path / "ledger.parquet"))
