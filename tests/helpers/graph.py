"""Shared test helpers (moved from test_definitions.py); tests import these, never each other."""

from __future__ import annotations

EXPECTED_EDGES = {
    "quality_classifier": {"raw_shards"},
    "toxicity_classifier": set(),
    "filtered_shards": {"raw_shards", "quality_classifier", "toxicity_classifier"},
    "minhash_signatures": {"filtered_shards"},
    "dedup_pairs": {"minhash_signatures"},
    "dedup_clusters": {"minhash_signatures", "dedup_pairs"},
    "deduped_shards": {"filtered_shards", "dedup_clusters"},
    "data_mixture": {"deduped_shards", "confirmed_quarantine", "mixture_search", "data_admission"},
    "tokenizer": {"data_mixture"},
    "packed_tokens": {"data_mixture", "tokenizer"},
    "checkpoints": {"packed_tokens", "tokenizer", "scaling_plan"},
    "eval_reports": {"checkpoints", "tokenizer"},
    "eval_comparison": {"eval_reports"},
    "hf_export": {"checkpoints", "tokenizer"},
    # the loop closes through quarantine_sensor (a declared edge from training would be a cycle)
    "quarantined_documents": set(),
    "confirmed_quarantine": {"quarantined_documents"},
    # the data-value engine: upstream of data_mixture, with a tokenizer of its own
    "experiment_basis": {"deduped_shards"},
    "proxy_pools": {"deduped_shards", "experiment_basis"},
    "ablation_pools": {"experiment_basis", "proxy_pools"},
    "proxy_runs": {"experiment_basis", "proxy_pools", "ablation_pools"},
    "mixture_search": {"proxy_runs"},
    "data_admission": {"proxy_pools", "proxy_runs"},
}
