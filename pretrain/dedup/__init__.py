"""Deduplication: exact text, URL and MinHash-LSH near duplicates, plus boilerplate lines.

Four steps, one per Dagster asset: :func:`pretrain.dedup.minhash.compute_signatures` per
shard (signatures, band-bucket rows, line hashes), :func:`pretrain.dedup.pairs.band_pairs` per
band x hash slice (verified pairs), :func:`pretrain.dedup.pairs.cluster_band_pairs` once (their
union, survivors, incremental state; :func:`pretrain.dedup.clusters.cluster_duplicates` is the
same in one process), and :func:`pretrain.dedup.apply.apply_dedup` per shard (keeps one
survivor per cluster, cuts boilerplate lines).
"""
