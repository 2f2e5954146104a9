"""``packed_tokens``: fixed-length token sequences (train shuffled, validation per source), an
index and a ledger from every step to its documents (library: :mod:`pretrain.packing`;
settings ``--packing.*``)."""

from foundation.assets import ERROR, Made, StageRun, stage_asset
from pretrain import verify
from pretrain.packing import pack_tokens


@stage_asset(
    "packed_tokens",
    stage="packing",
    deps=["data_mixture", "tokenizer"],
    code_version="packing-v3",  # v3: ledger.source_id
    group="corpus",
    checks={"ledger_tokens_equal_shard_tokens": ERROR, "validation_disjoint_from_train": ERROR},
)
def packed_tokens(run: StageRun) -> Made:
    """Fixed-length token sequences (train shuffled, validation per source) plus a ledger."""
    out, config = run.uri("packed_tokens"), run.library()
    ident = run.begin(out, config, [run.uri("data_mixture"), run.uri("tokenizer")])
    stats = pack_tokens(
        run.uri("data_mixture"), run.uri("tokenizer", "tokenizer.json"), out, config
    )
    validation = run.uri("data_mixture", "val.parquet")
    return run.made(out, ident, stats, config, checks={
        "ledger_tokens_equal_shard_tokens": verify.ledger_matches_tokens(out),
        "validation_disjoint_from_train": verify.ledger_excludes_validation(out, validation),
    })  # fmt: skip
