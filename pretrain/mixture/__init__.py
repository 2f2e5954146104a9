"""Data mixture: per-source split, decontamination, quality-weighted sampling to target weights.

Reads deduplicated document shards (``DOCUMENT_SCHEMA`` Parquet), splits every source into
train and validation by a hash of the document id, drops training documents that share a
13-gram with the evaluation sets, then samples each source's training documents so that it
contributes its target share of a character budget (derived from a token budget). A small
source is repeated (``epoch`` column) up to its epoch cap and reported when still too small;
a large one is sampled with P(doc) ∝ quality_score ** quality_alpha. Optional curriculum
stages (``stage`` column) each take a fraction of the budget with their own weights.

Usage::

    from pretrain.decontam import DecontamConfig
    from pretrain.mixture import MixtureConfig, build_mixture
    stats = build_mixture(
        ["art/deduped_shards/s0/documents.parquet", "art/deduped_shards/s1/documents.parquet"],
        "art/data_mixture",
        MixtureConfig(weights={"web": 0.7, "code": 0.2, "prose": 0.1}, token_budget=10_000_000,
                      quality_alpha=1.0, decontam=DecontamConfig(skip_missing=True)),
    )
    print(stats.share_table_md())

Writes ``train.parquet`` (id, text, source, language, quality_score, epoch, stage; ordered by
stage), ``val.parquet`` (id, text, source, language), ``decontaminated.parquet`` (id, source,
eval_sets: the audit of what decontamination dropped) and ``mixture.json`` (written last).
``documents_per_source(uris)`` counts what a mixture of them would weigh (one column read).
``train.parquet`` and ``val.parquet`` are written in row groups of about 4 MiB of text
(``write_documents``), so the packer streams them in bounded memory.

The split is a pure function of ``(seed, id)``: a document is validation iff
``int(sha1(f"{seed}:{id}")) % 10**6 < val_fraction * 10**6``, so adding documents never moves
existing ones between splits. The only exception is ``min_val_docs``: a source with at least
two documents but too few hashed into validation promotes its lowest-hash train documents.

| module        | concept                                                               |
|---------------|-----------------------------------------------------------------------|
| config.py     | ``MixtureConfig``, ``CurriculumStage``, ``llama2_like_mixture()``     |
| sampling.py   | the split and the quality-weighted per-source document stream         |
| build.py      | ``build_mixture``: targets, caps, decontamination, writing            |
| report.py     | ``MixtureStats`` and the realized-vs-target share table               |
"""

from pretrain.mixture.build import build_mixture, documents_per_source, write_documents
from pretrain.mixture.config import (
    DEFAULT_MAX_EPOCHS,
    LLAMA2_LIKE_WEIGHTS,
    CurriculumStage,
    MixtureConfig,
    is_val,
    llama2_like_mixture,
)
from pretrain.mixture.report import MixtureStats, SourceMix, StageMix

__all__ = [
    "DEFAULT_MAX_EPOCHS",
    "LLAMA2_LIKE_WEIGHTS",
    "CurriculumStage",
    "MixtureConfig",
    "MixtureStats",
    "SourceMix",
    "StageMix",
    "build_mixture",
    "documents_per_source",
    "is_val",
    "llama2_like_mixture",
    "write_documents",
]
