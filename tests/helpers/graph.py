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

# What an instance's history is keyed by, as the layout before the stage modules declared it
# (recorded from that commit): a change here orphans every existing materialization, check
# result or partition of a campaign.
HISTORY_CHECKS = {
    "checkpoints": {"healthy"},
    "data_mixture": {"train_decontaminated", "train_non_empty", "validation_disjoint_from_train"},
    "dedup_clusters": {"duplicate_rate_in_range"},
    "dedup_pairs": {"pairs_ordered_inside_corpus"},
    "deduped_shards": {"kept_plus_rejected_equals_input", "non_empty"},
    "eval_reports": {"metrics_finite"},
    "filtered_shards": {
        "drop_rate_per_reason_within_bounds", "kept_plus_rejected_equals_input", "non_empty"
    },
    "minhash_signatures": {"one_signature_per_document"},
    "packed_tokens": {"ledger_tokens_equal_shard_tokens", "validation_disjoint_from_train"},
    "quality_classifier": {"heldout_accuracy_above_min"},
    "raw_shards": {"documents_plus_rejects_equal_records_read", "non_empty"},
    "scaling_plan": {"plan_spends_the_budget"},
    "tokenizer": {"exact_round_trip"},
    "toxicity_classifier": {"heldout_recall_above_min"},
}  # fmt: skip
HISTORY_PARTITIONS = {  # asset -> the dynamic partitions' name
    "raw_shards": "shards", "filtered_shards": "shards", "minhash_signatures": "shards",
    "deduped_shards": "shards", "proxy_pools": "shards", "data_admission": "shards",
    "checkpoints": "checkpoints", "eval_reports": "checkpoints", "hf_export": "checkpoints",
    "quarantined_documents": "quarantine_decisions", "proxy_runs": "experiments",
    "ablation_pools": "ablations",
}  # fmt: skip
