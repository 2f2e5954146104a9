"""Tokenize the mixture and pack it into fixed-length token shards, an index and a ledger.

Every document is encoded, followed by EOS, and concatenated; the stream is cut into
``seq_len``-token sequences (the last partial sequence is dropped and counted). Train
sequences are shuffled with ``seed`` (within each curriculum stage; stages stay in order);
validation is packed per source, in order, so evaluation per source is exact.

Usage::

    from pretrain.packing import PackedSplit, PackingConfig, pack_tokens, read_packed_index
    stats = pack_tokens("art/data_mixture", "art/tokenizer", "art/packed_tokens",
                        PackingConfig(seq_len=2048, num_workers=4))
    index = read_packed_index("art/packed_tokens")  # refuses an uncommitted dir
    batch = PackedSplit(index, "train").rows(np.arange(16))   # (16, seq_len)

    from pretrain.packing import BatchPlan, trace_steps, window_token_ranges
    plan = BatchPlan(global_batch=16, micro_batch=4, world_size=2, seed=0)
    trace_steps("art/packed_tokens", plan, [1200])   # documents and sources of step 1200
    window_token_ranges("art/packed_tokens", plan, 1200, 1210)   # the skip window as tokens

On-disk contract (defined and read by ``format.py``), under the output dir:

- ``train-00000.bin``, ``val-<source>-00000.bin``: raw little-endian uint16 (vocab < 65536)
  or uint32, shape ``(num_sequences, seq_len)`` row-major, split at ``shard_bytes``.
- ``index.json``: format 1, seq_len, vocab_size, dtype, eos/bos/pad ids, tokenizer_sha256,
  ``splits.{train,val}.files[{file, num_sequences, source}]``, ``splits.train.stages
  [{name, first_sequence, num_sequences}]``, documents, tokens_tokenized.
- ``ledger.parquet``: for every packed sequence (``seq_index`` = its index in the order the
  shards hold it) the document pieces in it: seq_index, doc_id, source, epoch, token_start,
  token_end (offsets in the sequence), doc_token_offset, split, stage. Rows are in stream
  order (pieces of one sequence are consecutive); ``ledger.py`` maps steps to sequences.
- ``_COMMITTED``: written last.

Tokenization runs in ``num_workers`` processes (``encode.py``); memory stays bounded by the
batch size, one input row group and a 4 MiB write chunk, whatever the corpus size and
``shard_bytes`` (``stream.py``; ``bench/tokenize_pack.py`` measures peak RSS at 1x and 10x the
text). The output is byte-identical for the same inputs and config, whatever ``num_workers``.

| module      | concept                                                        |
|-------------|----------------------------------------------------------------|
| config.py   | ``PackingConfig``, ``PackingStats``, token dtype               |
| encode.py   | ordered batch encoding over worker processes                   |
| stream.py   | scratch token streams and the streamed ledger                  |
| pack.py     | ``pack_tokens``: stages, shuffle, shards, index                |
| format.py   | the format: ``index.json``, ``PackedSplit`` (the one reader)   |
| order.py    | the training order: permutations, ``BatchReader`` (resumable)  |
| staging.py  | ``s3://`` packed directories copied to this node's cache       |
| ledger.py   | step / micro-batch → sequences → documents; skip windows       |
"""

from pretrain.packing.config import PackingConfig, PackingStats, token_dtype
from pretrain.packing.format import FORMAT, PackedIndex, PackedSplit, read_packed_index
from pretrain.packing.ledger import (
    BatchPlan,
    steps_for_token_ranges,
    trace_steps,
    window_token_ranges,
)
from pretrain.packing.pack import pack_tokens

__all__ = [
    "FORMAT",
    "BatchPlan",
    "PackedIndex",
    "PackedSplit",
    "PackingConfig",
    "PackingStats",
    "pack_tokens",
    "read_packed_index",
    "steps_for_token_ranges",
    "token_dtype",
    "trace_steps",
    "window_token_ranges",
]
