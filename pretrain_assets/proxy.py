"""``proxy_runs[experiment]``: one proxy experiment (library: :mod:`pretrain.experiments`;
settings ``--proxy.*``): its data view, a small model trained on it, its validation bits per
byte per source, its targets, its task likelihood and its cost.

An experiment is registered (``experiment_specs/<name>.json``) before its partition runs: by
``pretrain experiments`` (add, search, ablate), by the ``launch_search`` job, or by
``experiment_sensor`` for a new shard group. It trains through ``proxy_launcher`` (the
campaign's torchrun launcher, one process) unless ``in_process`` is set; the same spec on the
same inputs has the same identity, so it is not trained twice.
"""

from typing import Any

from dagster import AllPartitionMapping, AssetDep, DataVersion, Failure

from foundation.assets import Made, StageRun, stage_asset
from foundation.experiments import experiment_root
from foundation.metadata import finish_output, to_metadata
from foundation.partitions import experiment_partitions
from pretrain import identity, storage
from pretrain.errors import DataError
from pretrain.eval.evaluate import EvalConfig
from pretrain.experiments import registry
from pretrain.experiments.config import ExperimentSpec
from pretrain.experiments.run import ExperimentResult, TrainFn, run_experiment, train_in_process
from pretrain.train.config import TrainConfig
from resources.launching import Launcher
from resources.storage import ArtifactStore

PROXY_CODE_VERSION = "proxy-v2"  # v2: a capped source is scored over all its sequences


def _launcher_train(run: StageRun, launcher: Launcher) -> TrainFn:
    def train(cfg: TrainConfig, config_path: str) -> None:
        result = launcher.launch(
            run.context.op_execution_context, config_path=config_path,
            run_dir=str(cfg.branch_dir()), on_message=lambda event: None,
        )  # fmt: skip
        if not result.ok:
            raise Failure(description=f"proxy training failed (exit {result.returncode})",
                          metadata=result.metadata())  # fmt: skip

    return train


def start_of(
    store: ArtifactStore, spec: ExperimentSpec
) -> tuple[ExperimentResult | None, list[str]]:
    """An anneal's base result and its folder (none for a proxy trained from scratch); the
    base must have run: ``experiment_sensor`` and ``pretrain experiments admit`` run it first."""
    if not spec.base:
        return None, []
    where = registry.result_dir(store.root, spec.base)
    result = registry.read_result(where)
    if result is None or identity.read(where) is None:
        raise DataError(
            f"experiment {spec.name} continues {spec.base}, which has not run: materialize "
            f"proxy_runs[{spec.base}] first (experiment_sensor runs it before the anneals)"
        )
    return result, [where]


@stage_asset(
    "proxy_runs",
    stage="proxy",
    partitions=experiment_partitions,
    deps=[
        "experiment_basis",
        AssetDep("proxy_pools", partition_mapping=AllPartitionMapping()),
        AssetDep("ablation_pools", partition_mapping=AllPartitionMapping()),
    ],
    code_version=PROXY_CODE_VERSION,
    group="experiments",
    resources=("proxy_launcher",),
)
def proxy_runs(run: StageRun) -> Made:
    """One proxy experiment: its data view, a small model trained on it, its validation bits
    per byte per source, its task likelihood and its cost."""
    name, config, basis = run.partition or "", run.library(), run.uri("experiment_basis")
    spec = registry.load_spec(run.store.root, name)
    root = experiment_root(run.context.instance, run.store)
    pools, pool_dirs = root.variant_pools(spec.variant)
    out = registry.result_dir(run.store.root, name)
    base, base_dirs = start_of(run.store, spec)
    tasks = EvalConfig(task_dir=config.task_dir).task_specs()
    settings = _settings(spec, config, tasks)
    inputs = [basis, *pool_dirs, *base_dirs]  # an anneal's base: its identity is chained in
    ident = identity.compute("proxy_runs", PROXY_CODE_VERSION, settings, inputs)
    existing = identity.read(out)
    cached = existing is not None and existing.version == ident.version
    if not cached:  # the same spec on the same inputs is never trained twice
        ident = run.begin(out, settings, inputs)
        train = (train_in_process if config.in_process
                 else _launcher_train(run, run.context.resources.proxy_launcher))  # fmt: skip
        run_experiment(
            spec, pools, val_packed_dir=storage.join(basis, "validation"),
            tokenizer_uri=storage.join(basis, "tokenizer"), out_dir=out, tasks=tasks,
            max_epochs=config.max_epochs, targets_packed_dir=root.targets_dir(), train_fn=train,
            base=base,
        )  # fmt: skip
        finish_output(out, ident)
    result = registry.read_result(out)
    if result is None:
        raise DataError(f"{out}: the proxy run left no result.json")
    return Made(
        data_version=DataVersion(ident.version),
        metadata=to_metadata(_summary(spec, result, cached, ident.version, out)),
    )


def _settings(spec: ExperimentSpec, config: Any, tasks: Any) -> dict[str, Any]:
    """What names a proxy's result: its spec, its epochs cap, and the task files it is scored
    on (a new task set is not scored with stale results)."""
    return {
        "spec": spec.settings(),
        "max_epochs": config.max_epochs,
        "tasks": {
            t.name or t.kind: identity.file_identity(t.path) if storage.exists(t.path) else None
            for t in tasks
        },  # fmt: skip
    }


def _summary(
    spec: ExperimentSpec, result: ExperimentResult, cached: bool, version: str, out: str
) -> dict[str, Any]:
    return {
        "kind": spec.kind, "group": spec.group, "label": spec.label, "recipe": spec.recipe,
        "seed": spec.seed, "cached": cached, "identity": version,
        "mean_bits_per_byte": result.mean_bits_per_byte, "bits_per_byte": result.bits_per_byte,
        "targets_bits_per_byte": result.targets, "shares": result.shares,
        "tasks": result.tasks, "cost": result.cost, "uri": out,
    }  # fmt: skip
