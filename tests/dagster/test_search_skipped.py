"""A mixture search that cannot run is skipped, says why, and the configured weights stand (issue 44).

A team's own crawl is one source: a search over it has nothing to decide. ``data_mixture`` with
``weights_from: searched`` then takes the configured weights, and the ``launch_search`` job (and
``pretrain experiments search``, which calls the same ``launch_search``) launches nothing. Both
run through Dagster here on hand-made deduplicated shards; the demo's own one-source run is in
``tests/dagster/test_readme_commands.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from dagster import DagsterInstance, Failure

from app.definitions import build_definitions
from foundation.experiment_launches import launch_search
from foundation.experiments import experiment_root
from foundation.stages import run_configs
from pretrain import identity, storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.errors import DataError
from pretrain.experiments.evidence import search_skipped
from pretrain.experiments.search import SearchConfig
from resources.storage import ArtifactStore
from tests.helpers.corpora import PLAIN_SENTENCES
from tests.helpers.experiments import deduplicated_groups

SEARCHED = {"mixture": {"weights_from": "searched", "decontam": None}}


def deduped_group(store: ArtifactStore, group: str, source: str, count: int) -> None:
    """``count`` documents of ``source`` as the deduplicated shard ``group`` (an adopted output)."""
    texts = [f"{source} story {i}. " + " ".join(PLAIN_SENTENCES[i % 7 :][:6]) for i in range(count)]
    docs = [{"id": doc_id(t, source), "text": t, "source": source} for t in texts]
    out = store.uri("deduped_shards", group)
    storage.write_table(documents_table(docs), storage.join(out, "documents.parquet"))
    identity.adopt(out, "deduped_shards")


def run_mixture(
    root: Path, instance: DagsterInstance, *, raise_on_error: bool = False
) -> tuple[bool, dict, list[str]]:
    """(success, the data_mixture metadata, the run's warnings)."""
    defs = build_definitions(artifact_root=str(root))
    result = defs.resolve_job_def("data_mixture_job").execute_in_process(
        instance=instance, run_config=run_configs(SEARCHED)["data_mixture_job"],
        raise_on_error=raise_on_error,
    )  # fmt: skip
    warnings = [
        e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING
    ]
    found = result.get_asset_materialization_events()
    metadata = {
        k: v.value for k, v in found[0].step_materialization_data.materialization.metadata.items()
    } if found else {}  # fmt: skip
    return result.success, metadata, warnings


def test_one_source_mixture_takes_the_configured_weights(tmp_path: Path) -> None:
    store = ArtifactStore(root=str(tmp_path))
    deduped_group(store, "web-0000", "web", 12)
    with DagsterInstance.ephemeral() as instance:
        deduplicated_groups(instance, ["web-0000"])
        ok, metadata, warnings = run_mixture(tmp_path, instance)
        assert ok
        reason = "the corpus has one source, 'web': a mixture of one source has nothing to decide"
        assert metadata["weights_from"] == "config" and metadata["search_skipped"] == reason
        (line,) = [w for w in warnings if "mixture search skipped" in w]
        assert line == (
            f"mixture search skipped: {reason}; weights_from='searched' falls back to the "
            "configured weights (none set: each source's natural share)"
        )
        assert metadata["train_docs"] + metadata["val_docs"] == 12
        launched = launch_search(instance, store, SearchConfig(candidates=6))
        assert launched["skipped"] == reason and launched["backfill_id"] is None
        assert instance.get_backfills() == [] and not instance.get_dynamic_partitions("experiments")
    assert not storage.exists(store.uri("mixture_search", "launched"))  # nothing for the sensor


def test_two_sources_still_need_the_search_they_asked_for(tmp_path: Path) -> None:
    """With two sources a search can run: without its result the mixture fails, saying what
    to launch, rather than quietly taking other weights."""
    store = ArtifactStore(root=str(tmp_path))
    deduped_group(store, "web-0000", "web", 12)
    deduped_group(store, "news-0000", "news", 8)
    with DagsterInstance.ephemeral() as instance:
        deduplicated_groups(instance, ["web-0000", "news-0000"])
        with pytest.raises(
            (DataError, Failure), match="search.json does not exist: launch a mixture search"
        ):
            run_mixture(tmp_path, instance, raise_on_error=True)
        config = SearchConfig(candidates=6, target="bpb:code")
        assert launch_search(instance, store, config)["skipped"] == (
            "the target bpb:code names no source of the corpus (it has news, web)"
        )


@pytest.mark.parametrize("sources", [("web",), ("web", "web")])
def test_one_source_over_several_groups_is_still_one_source(
    tmp_path: Path, sources: tuple[str, ...]
) -> None:
    store = ArtifactStore(root=str(tmp_path))
    keys = [f"{source}-{i:04d}" for i, source in enumerate(sources)]
    for key, source in zip(keys, sources, strict=True):
        deduped_group(store, key, source, 6)
    with DagsterInstance.ephemeral() as instance:
        deduplicated_groups(instance, keys)
        launched = launch_search(instance, store, SearchConfig(candidates=6))
    assert launched["skipped"].startswith("the corpus has one source, 'web'")


def test_once_a_basis_exists_the_search_weighs_the_admitted_groups(tmp_path: Path) -> None:
    """A group that arrived after the basis and has no admission decision is not in the
    experiments' corpus (nor in a search's pools): a search over the rest is over one source."""
    store = ArtifactStore(root=str(tmp_path))
    deduped_group(store, "web-0000", "web", 6)
    deduped_group(store, "news-0000", "news", 6)
    with DagsterInstance.ephemeral() as instance:
        deduplicated_groups(instance, ["web-0000", "news-0000"])
        root = experiment_root(instance, store)
        assert search_skipped(root, SearchConfig(candidates=6)) is None
        storage.write_json(
            {"shard_groups": ["web-0000"]}, store.uri("experiment_basis", "basis.json")
        )
        skipped = launch_search(instance, store, SearchConfig(candidates=6))["skipped"]
    assert skipped.startswith("the corpus has one source, 'web'")
