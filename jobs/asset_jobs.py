"""Asset jobs, one per stage boundary, so partitions run as separate runs.

A per-shard stage (``ingest``, ``shard_pipeline``, ``apply_dedup``) runs once per shard
partition, ``band_pairs`` (asset ``dedup_pairs``) once per band partition; the global
stages (``quality``, ``dedup``, ``corpus``) run once over all shards. Order: ``ingest`` per shard → ``quality`` →
``shard_pipeline`` per shard → ``band_pairs`` per band partition → ``dedup`` → ...
"""

from dagster import AssetSelection, define_asset_job

ingest_job = define_asset_job(
    "ingest",
    selection=AssetSelection.assets("raw_shards"),
    description="Read one shard group's raw files into documents + rejects.",
)
quality_job = define_asset_job(
    "quality",
    selection=AssetSelection.assets("quality_classifier", "toxicity_classifier"),
    description="Train the classifiers the filter uses: fastText quality on every raw shard, "
    "fastText toxicity on your labelled files (skipped without any).",
)
shard_pipeline_job = define_asset_job(
    "shard_pipeline",
    selection=AssetSelection.assets("filtered_shards", "minhash_signatures"),
    description="Filter and sign one shard group (needs its raw shard and the classifier).",
)
dedup_pairs_job = define_asset_job(
    "band_pairs",
    selection=AssetSelection.assets("dedup_pairs"),
    description="Verified duplicate pairs of one band x hash slice (a backfill runs them all).",
)
dedup_clusters_job = define_asset_job(
    "dedup",
    selection=AssetSelection.assets("dedup_clusters"),
    description="Union of every band partition's pairs: clusters, survivors, boilerplate.",
)
deduped_shards_job = define_asset_job(
    "apply_dedup",
    selection=AssetSelection.assets("deduped_shards"),
    description="Drop non-survivors from one shard group.",
)
corpus_job = define_asset_job(
    "corpus",
    selection=AssetSelection.assets("data_mixture", "tokenizer", "packed_tokens"),
    description="Mixture, tokenizer and packed tokens from the deduplicated shards.",
)
mixture_job = define_asset_job(
    "mixture",
    selection=AssetSelection.assets("data_mixture"),
    description="The training mixture alone (what `pretrain data` ends with).",
)
eval_job = define_asset_job(
    "evaluate",
    selection=AssetSelection.assets("eval_reports"),
    description="Evaluate one checkpoint.",
)

plan_job = define_asset_job(
    "plan",
    selection=AssetSelection.assets("scaling_plan"),
    description="The compute plan: Chinchilla and overtrained (N, D), FLOPs, GPU-hours, cost.",
)

compare_evals_job = define_asset_job(
    "compare_evals",
    selection=AssetSelection.assets("eval_comparison"),
    description="Charts of validation loss and task accuracy across every evaluated checkpoint.",
)
hf_export_job = define_asset_job(
    "export_hf",
    selection=AssetSelection.assets("hf_export"),
    description="Export one checkpoint to Hugging Face Llama format.",
)

experiment_basis_job = define_asset_job(
    "make_basis",
    selection=AssetSelection.assets("experiment_basis"),
    description="The proxy tokenizer and the validation set every experiment shares.",
)
proxy_pools_job = define_asset_job(
    "make_pools",
    selection=AssetSelection.assets("proxy_pools"),
    description="One shard group tokenized for the proxies (a backfill makes every pool).",
)
ablation_pools_job = define_asset_job(
    "make_ablation_pools",
    selection=AssetSelection.assets("ablation_pools"),
    description="A filter ablation's arm: the admitted groups filtered again and pooled.",
)
proxy_runs_job = define_asset_job(
    "run_proxies",
    selection=AssetSelection.assets("proxy_runs"),
    description="Train and score one proxy experiment (a backfill runs a search or ablation).",
)
mixture_search_job = define_asset_job(
    "fit_search",
    selection=AssetSelection.assets("mixture_search"),
    description="Fit the search's proxies: held-out rank correlation and the proposed weights.",
)
data_admission_job = define_asset_job(
    "decide_admission",
    selection=AssetSelection.assets("data_admission"),
    description="Decide one shard group from its proxies, noise risk and cleaning cost.",
)

ASSET_JOBS = [
    plan_job,
    ingest_job,
    quality_job,
    shard_pipeline_job,
    dedup_pairs_job,
    dedup_clusters_job,
    deduped_shards_job,
    corpus_job,
    mixture_job,
    eval_job,
    compare_evals_job,
    hf_export_job,
    experiment_basis_job,
    proxy_pools_job,
    ablation_pools_job,
    proxy_runs_job,
    mixture_search_job,
    data_admission_job,
]
