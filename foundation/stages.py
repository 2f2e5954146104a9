"""Which library config each stage's launch takes, and where it goes in a run config.

One registry for the Launchpad (the generated ``Config`` classes the assets are typed with),
the ``pretrain`` command line (``--<stage>.<field path>`` options, see
:mod:`pretrain.settings`) and the tests that check both against the library's defaults::

    STAGES["filter"].config_class           # the filtered_shards asset's config type
    run_configs({"filter": {"langid": {"min_score": 0.5}}})
    # {"filtered_shards": {"ops": {"filtered_shards": {"config": {"langid": {...}}}}}}
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from dagster import Config

from foundation.config import build, config_class
from foundation.partitions import check_band_layout
from pretrain.data.config import RawShardConfig
from pretrain.dedup.config import DedupConfig
from pretrain.eval.evaluate import EvalConfig
from pretrain.experiments.admission import AdmissionConfig
from pretrain.experiments.basis import BasisConfig
from pretrain.experiments.config import ExperimentsConfig
from pretrain.experiments.search import SearchConfig
from pretrain.filters.config import FilterConfig
from pretrain.filters.toxicity_classifier import ToxicityClassifierConfig
from pretrain.hf_export import HfExportConfig
from pretrain.mixture.config import MixtureConfig
from pretrain.packing.config import PackingConfig
from pretrain.quality.classifier import QualityClassifierConfig
from pretrain.quarantine.config import QuarantineConfig
from pretrain.scaling import PlanConfig
from pretrain.settings import add_options, chosen
from pretrain.tokenizer import TokenizerConfig
from pretrain.train.config import TrainConfig


@dataclass(frozen=True)
class Stage:
    """A stage's library config, the fields its asset fills in itself, and the (job, op)
    pairs that take it (signatures and clusters share one dedup config)."""

    library: type
    targets: tuple[tuple[str, str], ...]
    exclude: tuple[str, ...] = ()
    optional: bool = False  # training: every field an override of the recipe

    @property
    def config_class(self) -> type[Config]:
        return config_class(self.library, exclude=self.exclude, optional=self.optional)


def job_name(asset: str) -> str:
    """The job that materializes ``asset``, named after it: ``raw_shards_job`` (Dagster refuses
    a job that shares its name with an op, and each asset's op is named after the asset)."""
    return f"{asset}_job"


def _own(*assets: str) -> tuple[tuple[str, str], ...]:
    """Each asset's own job and op."""
    return tuple((job_name(asset), asset) for asset in assets)


STAGES: dict[str, Stage] = {
    "raw": Stage(RawShardConfig, _own("raw_shards")),
    "quality": Stage(QualityClassifierConfig, _own("quality_classifier")),
    "toxicity": Stage(ToxicityClassifierConfig, _own("toxicity_classifier")),
    "filter": Stage(
        FilterConfig,
        _own("filtered_shards"),
        exclude=("quality_model_uri", "toxicity.classifier_uri"),
    ),
    "dedup": Stage(DedupConfig, _own("minhash_signatures", "dedup_pairs", "dedup_clusters")),
    "mixture": Stage(MixtureConfig, _own("data_mixture")),
    "tokenizer": Stage(TokenizerConfig, _own("tokenizer")),
    "packing": Stage(PackingConfig, _own("packed_tokens")),
    "eval": Stage(EvalConfig, _own("eval_reports")),
    "export": Stage(HfExportConfig, _own("hf_export")),
    "plan": Stage(PlanConfig, _own("scaling_plan")),
    "quarantine": Stage(QuarantineConfig, _own("quarantined_documents")),
    "basis": Stage(BasisConfig, _own("experiment_basis")),
    "proxy": Stage(ExperimentsConfig, _own("proxy_runs")),
    "search": Stage(
        SearchConfig, (*_own("mixture_search"), ("launch_search", "launch_mixture_search"))
    ),
    "admission": Stage(AdmissionConfig, _own("data_admission")),
    "train": Stage(
        TrainConfig,
        (("train", "train_model"),),
        exclude=("data.packed_dir", "checkpoint.run_root"),
        optional=True,
    ),
}


def add_stage_options(parser: argparse.ArgumentParser, stages: tuple[str, ...] = ()) -> None:
    """``--<stage>.<field>`` for every field of every stage (or of ``stages``)."""
    for name, stage in STAGES.items():
        if not stages or name in stages:
            defaults = "the recipe's" if stage.optional else None
            add_options(parser, name, stage.library, stage.exclude, defaults=defaults)


def stage_settings(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Stage name → the settings given on the command line (only those set)."""
    return {name: found for name in STAGES if (found := chosen(args, name))}


def _config_value(value: Any) -> Any:
    """A library value as Dagster config takes it: tuples (a frozen dataclass's sequences, as
    ``dataclasses.asdict`` gives them) become lists, recursively."""
    if isinstance(value, (list, tuple)):
        return [_config_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _config_value(v) for k, v in value.items()}
    return value


def run_configs(settings: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Job name → run config carrying ``settings`` to every op that takes them (settings may
    come from ``dataclasses.asdict`` of a library config: its tuples are passed as lists)."""
    configs: dict[str, dict[str, Any]] = {}
    for name, values in settings.items():
        for job, op in STAGES[name].targets:
            ops = configs.setdefault(job, {}).setdefault("ops", {})
            ops.setdefault(op, {"config": {}})["config"].update(_config_value(values))
    return configs


def check_settings(settings: dict[str, dict[str, Any]]) -> None:
    """Build every stage's library config from ``settings`` now, so that a bad value (or dedup
    sizes the band partitions cannot hold) is refused before the first run starts, not minutes
    later in the stage that reads it. Training settings are overrides of a recipe, checked when
    the recipe is resolved at launch."""
    for name, values in settings.items():
        stage = STAGES[name]
        if stage.optional:
            continue
        library = build(stage.library, values)
        if name == "dedup":
            check_band_layout(library)
