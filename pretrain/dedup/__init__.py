"""Deduplication: exact text, URL and MinHash-LSH near duplicates, plus boilerplate lines.

Three steps, one per Dagster asset: :func:`pretrain.dedup.minhash.compute_signatures` per
shard (signatures, band-bucket rows, line hashes), :func:`pretrain.dedup.clusters.cluster_duplicates`
once over all shards (band-partitioned, incremental), and :func:`pretrain.dedup.apply.apply_dedup`
per shard (keeps one survivor per cluster, cuts boilerplate lines).
"""
