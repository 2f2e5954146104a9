"""One factory for every stage's asset: the preamble is here, the body is the stage.

An asset body gets a :class:`StageRun` (the run's context, the artifact store, its launch
config, its partition) and returns what it :class:`Made`: the output's data version (its
identity), its metadata and each check's outcome. The factory declares the asset (its checks,
code version, group, partitions, step resources and retries), turns the Launchpad's config into
the stage's library dataclass (``run.library()``), refuses to retry bad input (``DataError``,
``ConfigError``, a store that refuses writes: it would fail alike), and records the result. A
per-shard asset (``partitions=shard_partitions``) runs a batch of shard groups in one run, each
with its own identity (:mod:`foundation.per_shard`)::

    @stage_asset("tokenizer", stage="tokenizer", deps=["data_mixture"],
                 code_version="tokenizer-v2", checks={"exact_round_trip": ERROR}, group="corpus")
    def tokenizer(run: StageRun) -> Made:
        \"\"\"Byte-level BPE trained on the mixture's training split.\"\"\"
        out, config = run.uri("tokenizer"), run.library()
        ident = run.begin(out, config, [run.uri("data_mixture")])
        stats = train_tokenizer(run.uri("data_mixture", "train.parquet"), out, config)
        return run.made(out, ident, stats, config, checks={"exact_round_trip": ...})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    AssetsDefinition,
    Failure,
    MaterializeResult,
    PartitionsDefinition,
    asset,
)

from foundation.config import to_library
from foundation.metadata import (
    ERROR,
    WARN,
    Check,
    Made,
    begin_output,
    check_result,
    finish_output,
    stage_metadata,
)
from foundation.partitions import shard_partitions
from foundation.per_shard import shard_asset
from foundation.stages import STAGES
from foundation.step_resources import NOT_RETRIED, STEP_RESOURCES, STEP_RETRY
from pretrain import identity
from pretrain.checks import CheckOutcome
from resources.storage import ArtifactStore

__all__ = ["ERROR", "WARN", "Check", "Made", "StageRun", "stage_asset"]


@dataclass
class StageRun:
    """What an asset body gets: the run, the store, the Launchpad's config of the stage (its
    library dataclass from :meth:`library`), and the partition it makes (None: unpartitioned)."""

    context: AssetExecutionContext
    store: ArtifactStore
    launch: Any
    stage: str | None
    partition: str | None

    def uri(self, *parts: str) -> str:
        return self.store.uri(*parts)

    def library(self, **given: Any) -> Any:
        """The stage's library config: the Launchpad's values, plus ``given`` (fields the asset
        fills in itself)."""
        assert self.stage is not None, "this asset has no stage settings"
        return to_library(self.launch, STAGES[self.stage].library, **given)

    def begin(
        self, out: str, settings: Any, inputs: list[str], look: identity.Look | None = None
    ) -> identity.Identity:
        """The output's identity (stale or incomplete inputs refused; an output made with
        other settings archived): :func:`foundation.metadata.begin_output`."""
        return begin_output(self.context, self.store, out, settings, inputs,
                            partition=self.partition, look=look)  # fmt: skip

    def made(
        self,
        out: str,
        ident: identity.Identity,
        stats: Any,
        config: Any,
        checks: Mapping[str, CheckOutcome] | None = None,
        **extra: Any,
    ) -> Made:
        """Record the complete output's identity; its stats as metadata (``extra`` beside)."""
        return Made(
            data_version=finish_output(out, ident),
            metadata=stage_metadata(stats, config, ident, **{"uri": out, **extra}),
            checks=checks or {},
        )


Body = Callable[[StageRun], Made]


def stage_asset(
    name: str,
    *,
    deps: Sequence[str | AssetDep | AssetsDefinition] | Mapping[str, bool] = (),
    code_version: str,
    group: str,
    stage: str | None = None,
    checks: Mapping[str, Check] | None = None,
    partitions: PartitionsDefinition | None = None,
    resources: Sequence[str] = (),
    retried: bool = False,
    launch_config: type | None = None,
    batched: bool = True,
) -> Callable[[Body], AssetsDefinition]:
    """The asset ``name`` whose ``body`` makes its output. ``deps``: upstream assets (for a
    per-shard asset, a mapping: upstream -> whether it is per-shard too); ``stage``: its
    settings in ``foundation.stages.STAGES`` (the Launchpad config and ``--<stage>.<field>``);
    ``resources``: what the body reads from ``run.context.resources`` besides the store;
    ``retried``: a step that died is run again (the data stages), bad input never;
    ``launch_config``: a run config class of its own (an operator's review), read as
    ``run.launch``; ``batched=False``: a per-shard asset whose runs make one group each
    (a decision per group)."""
    checks = dict(checks or {})
    config = launch_config or (STAGES[stage].config_class if stage else None)

    def decorate(body: Body) -> AssetsDefinition:
        if partitions is shard_partitions and batched:
            assert isinstance(deps, Mapping), f"{name}: a per-shard asset's deps say which are"
            return shard_asset(name, deps=deps, code_version=code_version, checks=checks,
                               config=config, group=group, body=_per_shard(body, stage))  # fmt: skip

        def compute(context: AssetExecutionContext, launch: Any) -> Any:
            partition = context.partition_key if context.has_partition_key else None
            run = StageRun(context=context, store=context.resources.store, launch=launch,
                           stage=stage, partition=partition)  # fmt: skip
            made = _not_retried(body, run)
            return MaterializeResult(
                data_version=made.data_version,
                metadata=made.metadata,
                check_results=[
                    check_result(c, outcome, warn=checks[c].warn)
                    for c, outcome in made.checks.items()
                ],
            )

        fn = _with_signature(name, body.__doc__, compute, config)
        return asset(
            name=name,
            deps=list(deps),
            partitions_def=partitions,
            code_version=code_version,
            group_name=group,
            check_specs=[
                AssetCheckSpec(c, asset=name, description=spec.description)
                for c, spec in checks.items()
            ],
            op_tags=STEP_RESOURCES.get(name),
            retry_policy=STEP_RETRY if retried else None,
            required_resource_keys={"store", *resources},
        )(fn)

    return decorate


def _per_shard(body: Body, stage: str | None) -> Callable[..., Made]:
    def one_group(
        context: AssetExecutionContext, key: str, store: ArtifactStore, launch: Any
    ) -> Made:
        return body(StageRun(context=context, store=store, launch=launch, stage=stage,
                             partition=key))  # fmt: skip

    one_group.__doc__ = body.__doc__
    return one_group


def _not_retried(body: Body, run: StageRun) -> Made:
    """The body's result; bad input or settings, or a store that refuses writes, fail the
    step at once with the reason (a retry would fail alike)."""
    try:
        return body(run)
    except NOT_RETRIED as exc:
        raise Failure(description=f"{type(exc).__name__}: {exc}", allow_retries=False) from exc


def _with_signature(
    name: str, doc: str | None, compute: Callable[..., Any], config: type | None
) -> Callable[..., Any]:
    """``compute`` with the signature Dagster reads: the context, and the run config class when
    the stage has settings (resources come through ``context.resources``)."""
    if config is not None:

        def configured(context: AssetExecutionContext, config: Any) -> Any:
            return compute(context, config)

        configured.__annotations__ = {"context": AssetExecutionContext, "config": config}
        fn: Callable[..., Any] = configured
    else:

        def plain(context: AssetExecutionContext) -> Any:
            return compute(context, None)

        plain.__annotations__ = {"context": AssetExecutionContext}
        fn = plain
    fn.__name__, fn.__qualname__, fn.__doc__ = name, name, doc
    return fn
