"""The data-value engine's yardstick and pools (library: :mod:`pretrain.experiments`; settings
``--basis.*``):

    deduped_shards[shard] ─▶ experiment_basis (proxy tokenizer, shared validation, targets, reserve)
    deduped_shards[shard] + experiment_basis ─▶ proxy_pools[shard]
    proxy_pools + experiment_basis ─▶ ablation_pools[arm] (a filter ablation's arm)

The experiments themselves are ``proxy_runs`` (``pretrain_assets/proxy.py``); what they decide
is ``mixture_search`` and ``data_admission``.
"""

from dagster import AllPartitionMapping, AssetDep

from foundation.assets import Made, StageRun, stage_asset
from foundation.experiments import corpus_groups, experiment_root
from foundation.metadata import finish_output, to_metadata
from foundation.partitions import ablation_partitions, shard_partitions
from foundation.per_shard import own_group
from pretrain import identity, storage
from pretrain.experiments.basis import build_basis, held_out_ids
from pretrain.experiments.corpus import ablation_variant, build_ablation_pools
from pretrain.experiments.pools import build_floor_pool, build_pool


def _version(uri: str) -> str:
    """The version of the completed output at ``uri`` (corpus_groups lists only those)."""
    ident = identity.read(uri)
    assert ident is not None, f"{uri} has no identity"
    return ident.version


@stage_asset(
    "experiment_basis",
    stage="basis",
    deps=[AssetDep("deduped_shards", partition_mapping=AllPartitionMapping())],
    code_version="basis-v2",  # v2: long validation documents are windows
    group="experiments",
)
def experiment_basis(run: StageRun) -> Made:
    """The proxies' tokenizer and the validation set every experiment is scored on, from the
    shard groups present now (later groups never enter it)."""
    config, groups, out = (
        run.library(),
        corpus_groups(run.context.instance),
        run.uri("experiment_basis"),
    )
    # a fixed yardstick: the groups' versions name it, but their later changes (incremental
    # dedup, new groups) never make it stale; it changes only when it is made again
    made_from = {g: _version(run.uri("deduped_shards", g)) for g in groups}
    ident = run.begin(out, {"config": config, "groups": made_from}, [])
    documents = [run.uri("deduped_shards", g, "documents.parquet") for g in groups]
    stats = build_basis(documents, out, config, shard_groups=groups)
    storage.write_json(stats.as_metadata(), storage.join(out, "basis.json"))
    for warning in (w for found in stats.warnings.values() for w in found):
        run.context.log.warning(warning)  # a yardstick too small to judge by
    return run.made(out, ident, stats, config)


@stage_asset(
    "proxy_pools",
    partitions=shard_partitions,
    deps={"deduped_shards": True, "experiment_basis": False},
    code_version="pools-v1",
    group="experiments",
)
def proxy_pools(run: StageRun) -> Made:
    """One shard group's documents in the proxy tokenizer, validation documents left out."""
    group, basis = run.partition or "", run.uri("experiment_basis")
    out = run.uri("proxy_pools", group)
    made = storage.read_json(storage.join(basis, "basis.json"))
    new = group not in made["shard_groups"]  # a group to decide: its floor is pooled too
    settings = {"seq_len": made["seq_len"], "floor": new}
    inputs = [run.uri("deduped_shards", group), basis]
    ident = run.begin(out, settings, inputs, look=own_group(run.store, group))
    documents = [run.uri("deduped_shards", group, "documents.parquet")]
    tokenizer, held, seq_len = (
        storage.join(basis, "tokenizer"),
        held_out_ids(basis),
        made["seq_len"],
    )
    pools = build_pool(documents, tokenizer, out, group=group, seq_len=seq_len, exclude_ids=held)
    floor = build_floor_pool(documents, tokenizer, out, group=group, seq_len=seq_len,
                             exclude_ids=held) if new else []  # fmt: skip
    return Made(data_version=finish_output(out, ident), metadata=to_metadata({
        "sources": {p.source: p.sequences for p in pools},
        "tokens": sum(p.tokens for p in pools),
        "floor_tokens": sum(p.tokens for p in floor),
        "documents": sum(p.documents for p in pools),
        "held_out_documents_left_out": pools[0].excluded_documents,
        "uri": out,
    }))  # fmt: skip


@stage_asset(
    "ablation_pools",
    partitions=ablation_partitions,
    deps=["experiment_basis", AssetDep("proxy_pools", partition_mapping=AllPartitionMapping())],
    code_version="ablation-pools-v1",
    group="experiments",
)
def ablation_pools(run: StageRun) -> Made:
    """A filter ablation's arm: every admitted shard group filtered again with the arm's
    settings and pooled (``pretrain experiments ablate`` registers the arm)."""
    root = experiment_root(run.context.instance, run.store)
    variant, out = ablation_variant(root, run.partition or "")
    ident = run.begin(out, variant.to_dict(), [run.uri("experiment_basis")])
    stats = build_ablation_pools(root, variant)
    return Made(
        data_version=finish_output(out, ident),
        metadata=to_metadata({"filter": variant.filter, "groups": stats, "uri": out}),
    )
