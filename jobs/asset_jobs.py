"""The asset jobs: one per asset, named after the asset it materializes.

A per-shard asset's job runs one shard group, or a batch of them as a backfill asks (its
backfill policy: ``foundation.per_shard``); a band partition's, one band x hash slice; a global
asset's, the asset. In pipeline order::

    raw_shards[shard] → quality_classifier, toxicity_classifier → filtered_shards[shard]
      → minhash_signatures[shard] → dedup_pairs[band] → dedup_clusters → deduped_shards[shard]
      → data_mixture → tokenizer → packed_tokens → train (checkpoints) → eval_reports[key]
      → eval_comparison, hf_export[key]
    experiment_basis → proxy_pools[shard] → ablation_pools[arm] → proxy_runs[experiment]
      → mixture_search, data_admission[shard];  scaling_plan
    quarantined_documents[decision] → confirmed_quarantine (an operator's review)

The training job is ``train`` (``jobs/training.py``), the search launcher ``launch_search``
(``jobs/launch_search.py``).
"""

from typing import Any

from dagster import AssetSelection, define_asset_job

from foundation.stages import job_name

DESCRIPTIONS = {
    "scaling_plan": "The compute plan: Chinchilla and overtrained (N, D), FLOPs, GPU-hours, cost.",
    "raw_shards": "Read shard groups' raw files into documents + rejects.",
    "quality_classifier": "Train the fastText quality classifier on every raw shard.",
    "toxicity_classifier": "Train a fastText toxicity classifier on your labelled files "
    "(skipped without any).",
    "filtered_shards": "Filter shard groups (needs their raw shards and the classifiers).",
    "minhash_signatures": "MinHash signatures, band buckets and line hashes of shard groups.",
    "dedup_pairs": "Verified duplicate pairs of one band x hash slice (a backfill runs them all).",
    "dedup_clusters": "Union of every band partition's pairs: clusters, survivors, boilerplate.",
    "deduped_shards": "Drop non-survivors from shard groups.",
    "data_mixture": "The training mixture and its validation split.",
    "tokenizer": "Byte-level BPE trained on the mixture.",
    "packed_tokens": "Fixed-length token sequences and the step ledger.",
    "eval_reports": "Evaluate one checkpoint.",
    "eval_comparison": "Charts of validation loss and task accuracy across every evaluated "
    "checkpoint.",
    "hf_export": "Export one checkpoint to Hugging Face Llama format.",
    "experiment_basis": "The proxy tokenizer and the validation set every experiment shares.",
    "proxy_pools": "Shard groups tokenized for the proxies (a backfill makes every pool).",
    "ablation_pools": "A filter ablation's arm: the admitted groups filtered again and pooled.",
    "proxy_runs": "Train and score one proxy experiment (a backfill runs a search or ablation).",
    "mixture_search": "Fit the search's proxies: held-out rank correlation and the proposed "
    "weights.",
    "data_admission": "Decide one shard group from its proxies, noise risk and cleaning cost.",
    "quarantined_documents": "Score the documents of one rollback's skip window (a partition "
    "per decision).",
    "confirmed_quarantine": "Confirm, release or extend a quarantine (reviewer and reason go "
    "to run tags); the mixture then excludes the confirmed documents.",
}


def asset_job(asset: str) -> Any:  # an unresolved asset job (Dagster does not export its type)
    """The job that materializes ``asset``, named after it (``raw_shards_job``)."""
    return define_asset_job(
        job_name(asset), selection=AssetSelection.assets(asset), description=DESCRIPTIONS[asset]
    )


JOBS = {asset: asset_job(asset) for asset in DESCRIPTIONS}
ASSET_JOBS = list(JOBS.values())
