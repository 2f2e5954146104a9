"""``tokenizer``: byte-level BPE trained on the mixture's training split, loadable by
``transformers`` (library: :mod:`pretrain.tokenizer`; settings ``--tokenizer.*``)."""

from foundation.assets import ERROR, Made, StageRun, stage_asset
from pretrain import verify
from pretrain.tokenizer import train_tokenizer


@stage_asset(
    "tokenizer",
    stage="tokenizer",
    deps=["data_mixture"],
    code_version="tokenizer-v2",
    group="corpus",
    checks={"exact_round_trip": ERROR},
)
def tokenizer(run: StageRun) -> Made:
    """Byte-level BPE trained on the mixture's training split."""
    out, config = run.uri("tokenizer"), run.library()
    ident = run.begin(out, config, [run.uri("data_mixture")])
    stats = train_tokenizer(run.uri("data_mixture", "train.parquet"), out, config)
    outcome = verify.tokenizer_round_trip(
        run.uri("tokenizer", "tokenizer.json"), run.uri("data_mixture", "val.parquet")
    )
    return run.made(out, ident, stats, config, checks={"exact_round_trip": outcome})
