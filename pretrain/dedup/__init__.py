"""Deduplication: exact text hashes plus MinHash-LSH near-duplicate clusters across shards.

Three steps, one per Dagster asset: :func:`pretrain.dedup.minhash.compute_signatures` per
shard, :func:`pretrain.dedup.clusters.cluster_duplicates` once over all shards, and
:func:`pretrain.dedup.apply.apply_dedup` per shard (keeps one survivor per cluster).
"""
