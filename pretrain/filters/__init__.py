"""Clean and filter documents: normalization, fastText language ID, heuristic rules.

Each filter returns ``None`` to keep a document or a stable snake_case reason to drop it;
:func:`pretrain.filters.pipeline.filter_shard` runs them over a raw shard and writes the kept
documents, the rejects (with reason) and per-reason counts.
"""
