"""A token stream on scratch disk and its ledger: the streaming half of packing.

    stream = TokenStream(scratch_dir, "train-0", np.dtype("<u2"))
    stream.append(flat_ids, doc_ids, sources, epochs, lengths)   # once per encoded batch
    stream.close()
    rows = stream.read_sequences(seq_len, order[:1024])          # (1024, seq_len), pread
    for table in stream.ledger_chunks(seq_len, position, split="train", stage=0):
        writer.write_table(table)

Tokens go to a flat scratch file and document metadata to a scratch Parquet file as they
arrive; the ledger is computed from that file chunk by chunk, and sequences are read back
with positioned reads (no memory map). Nothing proportional to the corpus is held in memory
except the per-sequence shuffle ``order`` and ``position`` arrays (8 bytes each per sequence:
8 MB per billion tokens at seq_len 2048).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

_META_SCHEMA = pa.schema(
    [("doc_id", pa.string()), ("source", pa.string()), ("source_id", pa.string()),
     ("epoch", pa.int32()), ("n", pa.int64())]
)  # fmt: skip
LEDGER_SCHEMA = pa.schema(
    [
        ("seq_index", pa.int64()),
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("source_id", pa.string()),  # the input record's own id (provenance)
        ("epoch", pa.int32()),
        ("token_start", pa.int32()),
        ("token_end", pa.int32()),
        ("doc_token_offset", pa.int64()),
        ("split", pa.string()),
        ("stage", pa.int32()),
    ]
)


class TokenStream:
    """One token stream being written to scratch files, with its document boundaries."""

    def __init__(self, scratch: Path, name: str, dtype: np.dtype) -> None:
        self.path = scratch / f"{name}.tokens"
        self.meta_path = scratch / f"{name}.meta.parquet"
        self.dtype = dtype
        self.num_tokens = 0
        self.num_docs = 0
        self.tokens_by_source: dict[str, int] = {}
        self._tokens = open(self.path, "wb")  # noqa: SIM115 (closed in close())
        self._meta = pq.ParquetWriter(self.meta_path, _META_SCHEMA)

    def append(
        self,
        tokens: np.ndarray,
        doc_ids: list[str],
        sources: list[str],
        epochs: list[int],
        lengths: np.ndarray,
        source_ids: list[str | None] | None = None,
    ) -> None:
        self._tokens.write(tokens.astype(self.dtype, copy=False).tobytes())
        self.num_tokens += len(tokens)
        self.num_docs += len(doc_ids)
        for source, n in zip(sources, lengths.tolist(), strict=True):
            self.tokens_by_source[source] = self.tokens_by_source.get(source, 0) + n
        source_ids = source_ids if source_ids is not None else [None] * len(doc_ids)
        columns = [doc_ids, sources, pa.array(source_ids, pa.string()),
                   pa.array(epochs, pa.int32()), pa.array(lengths, pa.int64())]  # fmt: skip
        self._meta.write_table(pa.Table.from_arrays(columns, schema=_META_SCHEMA))

    def close(self) -> None:
        self._tokens.close()
        self._meta.close()

    def read_sequences(self, seq_len: int, indices: np.ndarray) -> np.ndarray:
        """Sequences ``indices`` of the stream, shape ``(len(indices), seq_len)``, read with
        positioned file reads (one per run of consecutive indices). No memory map: a mapped
        file's touched pages count in the process RSS, and random reads fault in neighbouring
        pages, so gathering a shuffle through a map would grow RSS to the stream's size."""
        out = np.empty((len(indices), seq_len), self.dtype)
        if len(indices) == 0:
            return out
        row_bytes = seq_len * self.dtype.itemsize
        cuts = (np.flatnonzero(np.diff(indices) != 1) + 1).tolist()
        flat = out.data.cast("B")  # the array's own buffer, as bytes
        with open(self.path, "rb", buffering=0) as f:
            for lo, hi in zip([0, *cuts], [*cuts, len(indices)], strict=True):
                want = flat[lo * row_bytes : hi * row_bytes]
                f.seek(int(indices[lo]) * row_bytes)
                while want:  # readinto may return less than asked
                    got = f.readinto(want)
                    if not got:
                        raise OSError(f"{self.path}: short read at sequence {indices[lo]}")
                    want = want[got:]
        return out

    def ledger_chunks(
        self, seq_len: int, position: np.ndarray, *, split: str, stage: int, rows: int = 65536
    ) -> Iterator[pa.Table]:
        """Ledger rows of this stream, in stream order; ``position[s]`` = final index of the
        stream's s-th sequence (its place in the shards the trainer reads)."""
        packed_end = len(position) * seq_len
        offset = 0
        for batch in pq.ParquetFile(self.meta_path).iter_batches(batch_size=rows):
            sizes = batch.column("n").to_numpy()
            ends = offset + np.cumsum(sizes)
            starts = ends - sizes
            offset = int(ends[-1]) if len(ends) else offset
            pieces = doc_pieces(starts, ends, seq_len, packed_end)
            if len(pieces["doc"]) == 0:
                continue
            doc = pa.array(pieces["doc"])
            yield pa.Table.from_arrays(
                [
                    pa.array(position[pieces["seq"]], pa.int64()),
                    batch.column("doc_id").take(doc),
                    batch.column("source").take(doc),
                    batch.column("source_id").take(doc),
                    batch.column("epoch").take(doc),
                    pa.array(pieces["token_start"], pa.int32()),
                    pa.array(pieces["token_end"], pa.int32()),
                    pa.array(pieces["doc_token_offset"], pa.int64()),
                    pa.array([split] * len(doc), pa.string()),
                    pa.array(np.full(len(doc), stage, np.int32)),
                ],
                schema=LEDGER_SCHEMA,
            )


def doc_pieces(
    starts: np.ndarray, ends: np.ndarray, seq_len: int, packed_end: int
) -> dict[str, np.ndarray]:
    """Pieces of documents ``[starts, ends)`` (stream token offsets) per packed sequence;
    tokens at or after ``packed_end`` (the dropped tail) are left out."""
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
