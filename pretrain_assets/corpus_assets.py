"""Corpus assets: ``data_mixture`` → ``tokenizer`` → ``packed_tokens``."""

from dagster import AssetCheckSpec, AssetExecutionContext, Config, MaterializeResult, asset

from pretrain import storage, verify
from pretrain.decontam import DEFAULT_EVAL_FILES, DecontamConfig
from pretrain.mixture import CurriculumStage, MixtureConfig, build_mixture
from pretrain.packing import PackingConfig, pack_tokens
from pretrain.tokenizer import TokenizerConfig, train_tokenizer
from pretrain_assets.dedup_assets import deduped_shards
from pretrain_assets.metadata import check_result, stage_metadata
from pretrain_assets.partitions import shard_partitions
from resources.storage import ArtifactStore


class MixtureAssetConfig(Config):
    weights: dict[str, float] | None = None
    val_fraction: float = 0.05
    seed: int = 0
    token_budget: int | None = None  # tokens; None = every available document once
    max_epochs: dict[str, float] = {"web": 1.0}
    quality_alpha: float = 0.0
    stages: list[dict] = []  # [{"name": "main", "fraction": 0.9, "weights": {...} | None}, ...]
    decontam_eval_files: list[str] = list(DEFAULT_EVAL_FILES)
    decontam_skip_missing: bool = True  # the demo runs without ../shared/data


def mixture_config(config: MixtureAssetConfig) -> MixtureConfig:
    """Launch config -> library config."""
    decontam = None
    if config.decontam_eval_files:
        decontam = DecontamConfig(
            eval_files=tuple(config.decontam_eval_files),
            skip_missing=config.decontam_skip_missing,
        )
    return MixtureConfig(
        weights=config.weights,
        val_fraction=config.val_fraction,
        seed=config.seed,
        token_budget=config.token_budget,
        max_epochs=dict(config.max_epochs),
        quality_alpha=config.quality_alpha,
        stages=tuple(CurriculumStage(**stage) for stage in config.stages),
        decontam=decontam,
    )


@asset(
    deps=[deduped_shards],
    group_name="corpus",
    code_version="mixture-v4",  # v4: provenance columns (source_id, url, metadata) kept
    check_specs=[
        AssetCheckSpec("train_non_empty", asset="data_mixture"),
        AssetCheckSpec("validation_disjoint_from_train", asset="data_mixture"),
        AssetCheckSpec(
            "train_decontaminated",
            asset="data_mixture",
            description="no training document shares a 13-gram with a configured eval file",
        ),
    ],
)
def data_mixture(
    context: AssetExecutionContext, config: MixtureAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """Per-source weighted training mixture and a per-source validation split."""
    shards = context.instance.get_dynamic_partitions(shard_partitions.name)
    document_uris = [store.uri("deduped_shards", s, "documents.parquet") for s in shards]
    out = store.uri("data_mixture")
    library_config = mixture_config(config)
    stats = build_mixture(document_uris, out, library_config)
    train, val = storage.join(out, "train.parquet"), storage.join(out, "val.parquet")
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out, shards=len(shards)),
        check_results=[
            check_result("train_non_empty", verify.non_empty(train)),
            check_result("validation_disjoint_from_train", verify.splits_disjoint(train, val)),
            check_result(
                "train_decontaminated",
                verify.train_decontaminated(train, library_config.decontam),
            ),
        ],
    )


class TokenizerAssetConfig(Config):
    vocab_size: int = 4096
    sample_chars: int = 20_000_000
    cjk_share: float | None = None


@asset(
    deps=[data_mixture],
    group_name="corpus",
    code_version="tokenizer-v2",
    check_specs=[AssetCheckSpec("exact_round_trip", asset="tokenizer")],
)
def tokenizer(config: TokenizerAssetConfig, store: ArtifactStore) -> MaterializeResult:
    """Byte-level BPE trained on the mixture's training split."""
    out = store.uri("tokenizer")
    library_config = TokenizerConfig(
        vocab_size=config.vocab_size, sample_chars=config.sample_chars, cjk_share=config.cjk_share
    )
    stats = train_tokenizer(store.uri("data_mixture", "train.parquet"), out, library_config)
    outcome = verify.tokenizer_round_trip(
        storage.join(out, "tokenizer.json"), store.uri("data_mixture", "val.parquet")
    )
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out),
        check_results=[check_result("exact_round_trip", outcome)],
    )


class PackingAssetConfig(Config):
    seq_len: int = 256
    seed: int = 0
    num_workers: int = 1


@asset(
    deps=[data_mixture, tokenizer],
    group_name="corpus",
    code_version="packing-v3",  # v3: ledger.source_id
    check_specs=[
        AssetCheckSpec("ledger_tokens_equal_shard_tokens", asset="packed_tokens"),
        AssetCheckSpec("validation_disjoint_from_train", asset="packed_tokens"),
    ],
)
def packed_tokens(config: PackingAssetConfig, store: ArtifactStore) -> MaterializeResult:
    """Fixed-length token sequences (train shuffled, validation per source) plus a ledger."""
    out = store.uri("packed_tokens")
    library_config = PackingConfig(
        seq_len=config.seq_len, seed=config.seed, num_workers=config.num_workers
    )
    stats = pack_tokens(
        store.uri("data_mixture"), store.uri("tokenizer", "tokenizer.json"), out, library_config
    )
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out),
        check_results=[
            check_result("ledger_tokens_equal_shard_tokens", verify.ledger_matches_tokens(out)),
            check_result(
                "validation_disjoint_from_train",
                verify.ledger_excludes_validation(out, store.uri("data_mixture", "val.parquet")),
            ),
        ],
    )
