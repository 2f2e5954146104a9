"""``mixture_search``: RegMix over a search's candidate proxies (library:
:mod:`pretrain.experiments.search`; settings ``--search.*``): a regression from mixture weights
to the chosen target, its held-out rank correlation, and the weights it proposes (verified by
a proxy of its own unless ``verify`` is off). ``launch_search`` (or ``pretrain experiments
search``) launches the candidates; ``experiment_sensor`` asks for this fit once they have run."""

from dagster import AllPartitionMapping, AssetDep, MetadataValue

from foundation.assets import Made, StageRun, stage_asset
from foundation.experiments import experiment_root
from foundation.metadata import finish_output, to_metadata
from pretrain import storage
from pretrain.experiments.evidence import search_result


@stage_asset(
    "mixture_search",
    stage="search",
    deps=[AssetDep("proxy_runs", partition_mapping=AllPartitionMapping())],
    code_version="search-v2",
    group="experiments",
)
def mixture_search(run: StageRun) -> Made:
    """RegMix: a regression from mixture weights to the chosen target over the search's
    candidate proxies, its held-out rank correlation, and the weights it proposes."""
    out = run.uri("mixture_search")
    found = search_result(experiment_root(run.context.instance, run.store), run.library())
    ident = run.begin(out, found.settings, found.inputs)
    storage.write_json(found.report, storage.join(out, "search.json"))
    return Made(data_version=finish_output(out, ident), metadata={
        **to_metadata(found.summary), "identity": ident.version,
        "fit_md": MetadataValue.md(found.chart_md),
    })  # fmt: skip
