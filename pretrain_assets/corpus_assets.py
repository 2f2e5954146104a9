"""Corpus assets: ``data_mixture`` → ``tokenizer`` → ``packed_tokens``."""

from dagster import AssetCheckSpec, AssetExecutionContext, Config, MaterializeResult, asset

from pretrain import storage, verify
from pretrain.mixture import MixtureConfig, build_mixture
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


@asset(
    deps=[deduped_shards],
    group_name="corpus",
    code_version="mixture-v1",
    check_specs=[
        AssetCheckSpec("train_non_empty", asset="data_mixture"),
        AssetCheckSpec("validation_disjoint_from_train", asset="data_mixture"),
    ],
)
def data_mixture(
    context: AssetExecutionContext, config: MixtureAssetConfig, store: ArtifactStore
) -> MaterializeResult:
    """Per-source weighted training mixture and a per-source validation split."""
    shards = context.instance.get_dynamic_partitions(shard_partitions.name)
    document_uris = [store.uri("deduped_shards", s, "documents.parquet") for s in shards]
    out = store.uri("data_mixture")
    library_config = MixtureConfig(
        weights=config.weights, val_fraction=config.val_fraction, seed=config.seed
    )
    stats = build_mixture(document_uris, out, library_config)
    train, val = storage.join(out, "train.parquet"), storage.join(out, "val.parquet")
    return MaterializeResult(
        metadata=stage_metadata(stats, library_config, uri=out, shards=len(shards)),
        check_results=[
            check_result("train_non_empty", verify.non_empty(train)),
            check_result("validation_disjoint_from_train", verify.splits_disjoint(train, val)),
        ],
    )


class TokenizerAssetConfig(Config):
    vocab_size: int = 4096
    sample_chars: int = 20_000_000


@asset(
    deps=[data_mixture],
    group_name="corpus",
    code_version="tokenizer-v1",
    check_specs=[AssetCheckSpec("exact_round_trip", asset="tokenizer")],
)
def tokenizer(config: TokenizerAssetConfig, store: ArtifactStore) -> MaterializeResult:
    """Byte-level BPE trained on the mixture's training split."""
    out = store.uri("tokenizer")
    library_config = TokenizerConfig(vocab_size=config.vocab_size, sample_chars=config.sample_chars)
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


@asset(
    deps=[data_mixture, tokenizer],
    group_name="corpus",
    code_version="packing-v1",
    check_specs=[
        AssetCheckSpec("ledger_tokens_equal_shard_tokens", asset="packed_tokens"),
        AssetCheckSpec("validation_disjoint_from_train", asset="packed_tokens"),
    ],
)
def packed_tokens(config: PackingAssetConfig, store: ArtifactStore) -> MaterializeResult:
    """Fixed-length token sequences (train shuffled, validation per source) plus a ledger."""
    out = store.uri("packed_tokens")
    library_config = PackingConfig(seq_len=config.seq_len, seed=config.seed)
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
