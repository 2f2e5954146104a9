"""``launch_search``: register a mixture search's candidates and launch them as one backfill.

Launch it from the Launchpad with the search's settings (the same ``SearchConfig`` the
``mixture_search`` asset fits with); the daemon runs the backfill of ``proxy_runs``, and
``experiment_sensor`` materializes ``mixture_search`` with the same settings when every
candidate has run. ``pretrain experiments search`` does the same from a terminal.
"""

from typing import TYPE_CHECKING, Any

from dagster import OpExecutionContext, job, op

from foundation.config import to_library
from foundation.experiment_launches import launch_search, record_search
from foundation.stages import STAGES
from pretrain.experiments.search import SearchConfig
from resources.storage import ArtifactStore

if TYPE_CHECKING:  # classes generated from library dataclasses (foundation.config): Any to mypy
    SearchLaunchConfig = Any
else:
    SearchLaunchConfig = STAGES["search"].config_class


@op
def launch_mixture_search(
    context: OpExecutionContext, config: SearchLaunchConfig, store: ArtifactStore
) -> dict:
    """Sample the candidates, register them, launch the ones not run yet as one backfill."""
    library_config = to_library(config, SearchConfig)
    launched = launch_search(context.instance, store, library_config)
    if launched.get("skipped"):
        context.log.warning(
            f"mixture search skipped: {launched['skipped']}; nothing launched, and data_mixture "
            "with weights_from: searched takes the configured weights"
        )
        return launched
    record_search(store, library_config, launched)
    context.log.info(f"mixture search launched: {launched}")
    return launched


@job(name="launch_search", description="Launch a mixture search's proxies as one backfill.")
def launch_search_job() -> None:
    launch_mixture_search()
