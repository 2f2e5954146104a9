"""One experiment end to end: the view, the proxy's training, its evaluation, its cost.

    result = run_experiment(spec, pools, val_packed_dir="art/packed_tokens",
                            tokenizer_uri="art/tokenizer", out_dir="art/proxy_runs/mix-…-s0")
    result.bits_per_byte            # {"web": 1.92, "news": 2.05, ..., "overall": 1.98}
    result.cost                     # tokens, FLOPs, train / eval / wall seconds

The proxy trains with the project's own trainer: ``train_fn(config, config_path)`` runs
``python -m pretrain.train --config`` in this process by default (:func:`train_in_process`);
the Dagster asset passes its launcher instead (the same ``torchrun`` command as the campaign).
Every experiment is scored on the same validation data (the campaign's ``packed_tokens`` val
split, per source) and the same task examples, so results compare across experiments.

``out_dir`` receives ``spec.json``, ``view/`` (the data view), ``run/`` (the proxy's
checkpoint and ``metrics.jsonl``), ``eval/`` (``report.json``) and ``result.json``.

A proxy run starts clean: what an earlier run of the same experiment left (its ``result.json``,
its ``run/`` folder with the checkpoints of a run killed after its last commit, a kept
``checkpoint/`` on S3) is removed before training, so a rerun after its inputs changed, or
after a kill, trains again from the start instead of failing on the old checkpoint, and an old
result never outlives the run that replaces it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pretrain import storage
from pretrain.checkpoint.config import CheckpointConfig
from pretrain.errors import DataError
from pretrain.eval.evaluate import EvalConfig, EvalStats, evaluate_checkpoint
from pretrain.eval.tasks import TaskSpec
from pretrain.experiments.config import ExperimentSpec, ProxyRecipe, get_proxy_recipe
from pretrain.experiments.pools import PoolInfo
from pretrain.experiments.records import json_object, read_record
from pretrain.experiments.view import ViewPlan, plan_view, write_view
from pretrain.experiments.yardsticks import TARGET_PREFIX
from pretrain.model.config import flops_per_token, num_params
from pretrain.model.recipes import get_recipe
from pretrain.train.config import (
    DataConfig,
    MetricsConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)

RESULT_FILE = "result.json"
SPEC_FILE = "spec.json"
TrainFn = Callable[[TrainConfig, str], None]


@dataclass(frozen=True, kw_only=True)
class ExperimentResult:
    """What one proxy run measured (``result.json``)."""

    name: str
    spec: dict[str, Any]
    shares: dict[str, float]  # source -> share of the training sequences
    rows: dict[str, int]  # pool group -> sequences read
    loss: dict[str, float]  # source (and "overall") -> validation loss
    bits_per_byte: dict[str, float]  # source (and "overall") -> validation bits per byte
    tasks: dict[str, dict[str, float]]  # task -> correct_prob, correct_logprob_per_byte, acc
    cost: dict[str, float]  # params, tokens, flops, train_s, eval_s, wall_s
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    checkpoint: str = ""  # the proxy's final checkpoint (what an anneal of it starts from)
    targets: dict[str, float] = field(default_factory=dict)  # target set -> bits per byte

    @property
    def mean_bits_per_byte(self) -> float:
        """Mean over sources (each source counts once, whatever its size)."""
        values = [v for k, v in self.bits_per_byte.items() if k != "overall"]
        return sum(values) / len(values)

    def task_likelihood(self) -> float:
        """Mean ``correct_prob`` over the scored tasks (NaN when none was scored)."""
        values = [t["correct_prob"] for t in self.tasks.values()]
        return sum(values) / len(values) if values else math.nan

    def target(self, name: str) -> float:
        """A target to minimise: ``mean_bpb``, ``bpb:<source>``, ``target:<target set>``
        (bits per byte on a user's yardstick), ``task_likelihood`` or ``task:<task>`` (the
        probability of the correct answer, negated: lower is better for all)."""
        if name == "mean_bpb":
            return self.mean_bits_per_byte
        if name == "task_likelihood":
            return -self.task_likelihood()
        if name.startswith("bpb:") and name[4:] in self.bits_per_byte:
            return self.bits_per_byte[name[4:]]
        if name.startswith(TARGET_PREFIX) and name[len(TARGET_PREFIX) :] in self.targets:
            return self.targets[name[len(TARGET_PREFIX) :]]
        if name.startswith("task:") and name[5:] in self.tasks:
            return -self.tasks[name[5:]]["correct_prob"]
        raise DataError(
            f"unknown target {name!r}; use mean_bpb, task_likelihood, bpb:<source> with a "
            f"source of {sorted(k for k in self.bits_per_byte if k != 'overall')}, "
            f"target:<name> with a target of {sorted(self.targets)} or task:<name> with a "
            f"task of {sorted(self.tasks)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentResult:
        data = json_object(data)
        curve = [(int(s), float(v)) for s, v in data.get("loss_curve", [])]
        return cls(**{**data, "loss_curve": curve})


def read_result(out_dir: str) -> ExperimentResult | None:
    """The ``result.json`` in ``out_dir`` as it is (None when there is none): whether it counts
    is the registry's question (``registry.results``: only while its identity is current)."""
    where = storage.join(out_dir, RESULT_FILE)
    if not storage.exists(where):
        return None
    return read_record(where, ExperimentResult.from_dict, "a proxy result")


def proxy_train_config(
    recipe: ProxyRecipe,
    *,
    view_dir: str,
    run_root: str,
    seed: int,
    seq_len: int,
    vocab_size: int,
    init_from: str | None = None,
) -> TrainConfig:
    """The proxy's TrainConfig: the recipe's model and batch, as many steps as its budget buys,
    one checkpoint at the end, no W&B (``metrics.jsonl`` keeps the loss curve); an anneal
    recipe starts from ``init_from``'s weights."""
    steps = max(1, recipe.token_budget // (recipe.global_batch_sequences * seq_len))
    return TrainConfig(
        model=get_recipe(recipe.model)(vocab_size=vocab_size, max_seq_len=seq_len),
        optim=OptimConfig(
            lr=recipe.lr,
            warmup_steps=min(recipe.warmup_steps, steps),
            schedule_steps=steps,
            schedule=recipe.schedule,
            decay_fraction=recipe.decay_fraction,
        ),
        data=DataConfig(
            packed_dir=view_dir,
            micro_batch_size=recipe.micro_batch_size,
            global_batch_sequences=recipe.global_batch_sequences,
            seed=seed,
        ),
        checkpoint=CheckpointConfig(run_root=run_root, every_steps=steps, keep_last=1),
        run=RunConfig(branch="proxy", max_steps=steps, resume="none", init_from=init_from),
        metrics=MetricsConfig(wandb_mode="disabled", console_every_steps=0),
        seed=seed,
        deterministic=True,
    )


def train_in_process(cfg: TrainConfig, config_path: str) -> None:
    """``python -m pretrain.train --config config_path`` in this process (one rank)."""
    from pretrain.train.__main__ import main

    if main(["--config", config_path]) != 0:
        raise DataError(f"the proxy trainer did not finish ({config_path})")


def _base_checkpoint(spec: ExperimentSpec, base: ExperimentResult | None) -> str | None:
    """The checkpoint an anneal starts from (None for a proxy trained from scratch)."""
    if not spec.base:
        return None
    if base is None or base.name != spec.base:
        raise DataError(
            f"experiment {spec.name} continues {spec.base}: pass that experiment's result "
            f"(got {base.name if base else None}); run {spec.base} first"
        )
    if not base.checkpoint:
        raise DataError(f"{spec.base} kept no checkpoint (a result from before anneals): rerun it")
    return base.checkpoint


def _keep_checkpoint(checkpoint: str, out_dir: str, local: str) -> str:
    """Where the final checkpoint stays: in place when the run folder is ``out_dir``; copied
    to ``out_dir/checkpoint`` (its commit record last) when ``out_dir`` is on S3."""
    if not storage.is_s3(out_dir) or not checkpoint.startswith(local):
        return checkpoint
    from pretrain.checkpoint import dcp, remote

    record = dcp.read_commit_record(checkpoint)
    dest = storage.join(out_dir, "checkpoint", Path(checkpoint).name)
    remote.upload_files(checkpoint, sorted(record["files"]), dest)
    remote.commit(dest, {k: v for k, v in record.items() if k != "committed"})
    return dest


def _scores(
    recipe: ProxyRecipe,
    checkpoint: str,
    val_packed_dir: str,
    tokenizer_uri: str,
    out_dir: str,
    tasks: tuple[TaskSpec, ...],
    targets_packed_dir: str | None = None,
) -> dict[str, Any]:
    """The checkpoint's ``loss``, ``bits_per_byte``, ``tasks`` and ``targets`` (as
    :class:`ExperimentResult` holds them), scored as the recipe says; the report lands in
    ``out_dir/eval`` (the targets' in ``out_dir/eval/targets``)."""

    def evaluate(
        packed_dir: str, report_dir: str, max_sequences: int, **settings: Any
    ) -> EvalStats:
        config = EvalConfig(
            max_sequences_per_source=max_sequences,
            batch_size=16,
            device=recipe.device,
            generation=None,
            **settings,
        )
        return evaluate_checkpoint(
            checkpoint, packed_dir, report_dir, config, tokenizer_uri=tokenizer_uri
        )

    stats = evaluate(
        val_packed_dir,
        storage.join(out_dir, "eval"),
        recipe.max_val_sequences,
        tasks=tasks,
        task_dir="" if not tasks else None,
        max_examples_per_task=recipe.max_task_examples,
    )
    targets: dict[str, float] = {}
    if targets_packed_dir is not None and storage.exists(
        storage.join(targets_packed_dir, "index.json")
    ):
        target_dir = storage.join(out_dir, "eval", "targets")
        per_source = evaluate(
            targets_packed_dir, target_dir, recipe.max_target_sequences, task_dir=""
        ).per_source
        targets = {s.source: float(s.bits_per_byte or math.nan) for s in per_source}
    scored = [*stats.per_source, stats.overall]
    return {
        "loss": {s.source: s.loss for s in scored},
        "bits_per_byte": {s.source: float(s.bits_per_byte or math.nan) for s in scored},
        "tasks": {
            name: {k: t[k] for k in ("correct_prob", "correct_logprob_per_byte", "acc")}
            for name, t in stats.tasks.items()
            if t.get("status") == "ok"
        },
        "targets": targets,
    }


def rescore_experiment(
    out_dir: str,
    *,
    val_packed_dir: str,
    tokenizer_uri: str,
    tasks: tuple[TaskSpec, ...] = (),
    targets_packed_dir: str | None = None,
) -> ExperimentResult:
    """Score a finished experiment's kept checkpoint again, on other validation data (a rebuilt
    basis whose training side is unchanged), without retraining it: ``result.json`` is
    rewritten with the new scores, its training and cost kept (``eval_s`` is the new
    scoring's). ``rescore_experiment("art/proxy_runs/mix-…-s0", val_packed_dir=…,
    tokenizer_uri=…)``."""
    result = read_result(out_dir)
    if result is None or not result.checkpoint or not storage.exists(result.checkpoint):
        raise DataError(f"{out_dir}: no finished experiment with a kept checkpoint to rescore")
    recipe = get_proxy_recipe(ExperimentSpec.from_dict(result.spec).recipe)
    started = time.perf_counter()
    scores = _scores(
        recipe, result.checkpoint, val_packed_dir, tokenizer_uri, out_dir, tasks,
        targets_packed_dir,
    )  # fmt: skip
    eval_s = time.perf_counter() - started
    cost = {**result.cost, "eval_s": eval_s,
            "wall_s": result.cost["wall_s"] - result.cost["eval_s"] + eval_s}  # fmt: skip
    rescored = dataclasses.replace(result, **scores, cost=cost)
    storage.write_json(rescored.to_dict(), storage.join(out_dir, RESULT_FILE))
    return rescored


def _loss_curve(metrics_path: Path) -> list[tuple[int, float]]:
    curve = []
    for line in metrics_path.read_text().splitlines() if metrics_path.exists() else []:
        row = json.loads(line)
        if row.get("loss") is not None:
            curve.append((int(row["step"]), float(row["loss"])))
    return curve


def clear_run(out_dir: str, local: str) -> None:
    """Remove what an earlier run of this experiment left: its result first (it must never
    outlive the run that replaces it), then its checkpoints (``local/run``; ``checkpoint/``
    when ``out_dir`` is on S3), its view and its scores."""
    storage.remove(storage.join(out_dir, RESULT_FILE))
    for folder in ("run", "view"):
        storage.remove_dir(str(Path(local) / folder))
    storage.remove_dir(storage.join(out_dir, "eval"))
    if storage.is_s3(out_dir):
        storage.remove_dir(storage.join(out_dir, "checkpoint"))


def _plan(
    spec: ExperimentSpec, recipe: ProxyRecipe, pools: Sequence[PoolInfo], max_epochs: float
) -> tuple[ViewPlan, int, int]:
    """(the view of ``pools`` the proxy trains on, its sequence length, its steps)."""
    seq_len = {p.seq_len for p in pools}
    if len(seq_len) != 1:
        raise DataError(f"the pools have different sequence lengths {sorted(seq_len)}")
    (length,) = seq_len
    steps = max(1, recipe.token_budget // (recipe.global_batch_sequences * length))
    plan = plan_view(
        pools,
        weights=spec.variant.weights,
        num_sequences=steps * recipe.global_batch_sequences,
        max_epochs=max_epochs,
        boost=spec.variant.boost,
        seed=spec.seed,
    )
    return plan, length, steps


def run_experiment(
    spec: ExperimentSpec,
    pools: Sequence[PoolInfo],
    *,
    val_packed_dir: str,
    tokenizer_uri: str,
    out_dir: str,
    tasks: tuple[TaskSpec, ...] = (),
    max_epochs: float = 4.0,
    train_fn: TrainFn = train_in_process,
    work_dir: str | None = None,
    base: ExperimentResult | None = None,
    targets_packed_dir: str | None = None,
) -> ExperimentResult:
    """Train and score the proxy of ``spec`` on a view of ``pools`` (see the module docstring);
    ``targets_packed_dir``: the basis's packed target sets, scored next to the validation set.

    ``work_dir`` (local) holds the view and the proxy's run while it trains; default: ``out_dir``
    when it is local, else a temporary folder whose results are copied to ``out_dir``. An
    anneal (``spec.base``) needs ``base``, the result of that experiment: its final checkpoint
    starts the proxy."""
    started = time.perf_counter()
    recipe = get_proxy_recipe(spec.recipe)
    init_from = _base_checkpoint(spec, base)
    plan, length, steps = _plan(spec, recipe, pools, max_epochs)
    with tempfile.TemporaryDirectory(prefix="proxy-") as scratch:
        local = work_dir or (out_dir if not storage.is_s3(out_dir) else scratch)
        clear_run(out_dir, local)
        view_dir = str(Path(local) / "view")
        write_view(plan, pools, view_dir)
        from pretrain.packing import read_packed_index

        vocab = read_packed_index(view_dir).vocab_size
        cfg = proxy_train_config(
            recipe, view_dir=view_dir, run_root=str(Path(local) / "run"), seed=spec.seed,
            seq_len=length, vocab_size=vocab, init_from=init_from,
        )  # fmt: skip
        config_path = str(Path(local) / "run.json")
        storage.write_bytes(cfg.to_json().encode(), config_path)
        storage.write_bytes(spec.to_json().encode(), storage.join(out_dir, SPEC_FILE))
        trained_at = time.perf_counter()
        train_fn(cfg, config_path)
        train_s = time.perf_counter() - trained_at
        checkpoint = str(cfg.branch_dir() / f"step-{steps:08d}")
        evaluated_at = time.perf_counter()
        scores = _scores(
            recipe, checkpoint, val_packed_dir, tokenizer_uri, out_dir, tasks, targets_packed_dir
        )
        eval_s = time.perf_counter() - evaluated_at
        curve = _loss_curve(cfg.metrics_path())
        kept = _keep_checkpoint(checkpoint, out_dir, local)
    tokens = steps * recipe.global_batch_sequences * (length - 1)
    result = ExperimentResult(
        name=spec.name,
        spec=spec.to_dict(),
        shares=plan.shares(pools),
        rows=plan.rows,
        **scores,
        cost={
            "params": float(num_params(cfg.model)),
            "steps": float(steps),
            "tokens": float(tokens),
            "flops": flops_per_token(cfg.model, length - 1) * tokens,
            "train_s": train_s,
            "eval_s": eval_s,
            "wall_s": time.perf_counter() - started,
        },
        loss_curve=curve,
        checkpoint=kept,
    )
    storage.write_json(result.to_dict(), storage.join(out_dir, RESULT_FILE))
    return result
