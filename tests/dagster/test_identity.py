"""Outputs carry their identity (issue 17) and stages refuse stale inputs (issue 19, item 11).

Library level: the identity hashes settings, inputs and code version; a changed input makes
everything made from it stale. Through Dagster: an identity is the asset's data version; a
``filtered_shards`` re-made with other settings archives the old output, and ``dedup_clusters``
then refuses the old signatures, naming what to re-materialize.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from app.definitions import build_definitions
from foundation.partitions import band_partitions
from foundation.shards import plan_source, register_shards
from pretrain import identity, storage
from pretrain.errors import DataError
from resources.storage import ArtifactStore
from sensors.backfill_schedule import partitions_data_version


def make(dir_: Path, stage: str, config: dict, inputs: list[Path]) -> identity.Identity:
    ident = identity.compute(stage, "v1", config, [str(p) for p in inputs])
    identity.prepare_output(str(dir_), ident, str(dir_.parent / "_versions"))
    storage.write_bytes(repr(config).encode(), str(dir_ / "data.txt"))
    identity.write(str(dir_), ident)
    return ident


def test_identity_depends_on_settings_inputs_and_code(tmp_path: Path) -> None:
    raw = make(tmp_path / "raw", "raw", {"n": 1}, [])
    same = identity.compute("raw", "v1", {"n": 1}, [])
    assert same.version == raw.version
    assert identity.compute("raw", "v2", {"n": 1}, []).version != raw.version
    assert identity.compute("raw", "v1", {"n": 2}, []).version != raw.version
    filtered = make(tmp_path / "filtered", "filtered", {"m": 1}, [tmp_path / "raw"])
    assert filtered.inputs == {str(tmp_path / "raw"): raw.version}


def test_a_changed_input_makes_its_descendants_stale(tmp_path: Path) -> None:
    make(tmp_path / "raw", "raw", {"n": 1}, [])
    make(tmp_path / "filtered", "filtered", {}, [tmp_path / "raw"])
    make(tmp_path / "sigs", "sigs", {}, [tmp_path / "filtered"])
    identity.compute("dedup", "v1", {}, [str(tmp_path / "sigs")])  # all fresh
    make(tmp_path / "raw", "raw", {"n": 2}, [])  # re-made with other settings
    with pytest.raises(DataError, match=r"filtered.*is stale.*raw"):
        identity.compute("dedup", "v1", {}, [str(tmp_path / "sigs")])
    # the old raw output was archived whole, not overwritten
    archived = list((tmp_path / "_versions").iterdir())
    assert len(archived) == 1 and (archived[0] / "data.txt").read_text() == "{'n': 1}"


def test_an_input_without_identity_is_refused(tmp_path: Path) -> None:
    (tmp_path / "half").mkdir()
    with pytest.raises(DataError, match="no identity record"):
        identity.compute("next", "v1", {}, [str(tmp_path / "half")])


@pytest.mark.slow
def test_dagster_data_versions_and_stale_signatures_refused(tmp_path: Path) -> None:
    root = str(tmp_path / "artifacts")
    defs = build_definitions(artifact_root=root)
    store = ArtifactStore(root=root)
    no_classifier = {"ops": {"filtered_shards": {"config": {"use_quality_classifier": False}}}}
    with DagsterInstance.ephemeral() as instance:
        [key] = register_shards(
            instance, store, plan_source("embedded", max_shards=1, max_files_per_source=6)
        )

        def run(job: str, partition: str | None = None, config: dict | None = None) -> bool:
            result = defs.resolve_job_def(f"{job}_job").execute_in_process(
                instance=instance, partition_key=partition, run_config=config or {},
                raise_on_error=False,
            )  # fmt: skip
            return result

        assert run("raw_shards", key).success
        assert run("filtered_shards", key, no_classifier).success
        assert run("minhash_signatures", key).success
        for band in band_partitions.get_partition_keys():
            assert run("dedup_pairs", band).success
        assert run("dedup_clusters").success
        filtered = instance.get_latest_materialization_event(AssetKey("filtered_shards"))
        version = identity.read(store.uri("filtered_shards", key)).version
        assert filtered.asset_materialization.tags["dagster/data_version"] == version
        sigs = instance.get_latest_materialization_event(AssetKey("minhash_signatures"))
        recorded = sigs.asset_materialization.tags["dagster/input_data_version/filtered_shards"]
        assert recorded == partitions_data_version([version])
        # re-filter with other settings, alone (possible from the UI): the old output is
        # archived and dedup refuses the signatures made from it
        stricter = {"ops": {"filtered_shards": {"config": {
            "use_quality_classifier": False, "heuristics": {"min_chars": 400}}}}}  # fmt: skip
        job = defs.resolve_job_def("filtered_shards_job")
        result = job.execute_in_process(instance=instance, partition_key=key, run_config=stricter)
        assert result.success
        archived = Path(store.uri("_versions", "filtered_shards", key, version))
        assert (archived / "documents.parquet").exists()
        refused = run("dedup_clusters")
        assert not refused.success
        [failure] = [e for e in refused.all_events if e.is_step_failure]
        error, message = failure.step_failure_data.error, ""
        while error is not None:
            message, error = message + error.message, error.cause
        assert "minhash_signatures" in message and "is stale" in message


def test_a_group_checks_its_own_signature_not_every_groups_chain(tmp_path: Path) -> None:
    """``deduped_shards[g]`` reads ``dedup_clusters``, made from every group's signatures: a
    full check of each group would read every group's chain (n^2 reads over a backfill). With
    ``own_group`` it checks its own chain and the clusters, the same few reads at any size, and
    still refuses clusters made before its own signature changed."""
    from foundation.per_shard import own_group
    from resources.storage import ArtifactStore

    store = ArtifactStore(root=str(tmp_path))

    def chain(groups: int) -> None:
        for g in range(groups):
            raw = make(tmp_path / "raw_shards" / f"g{g}", "raw_shards", {"g": g}, [])
            assert raw.version
            make(tmp_path / "filtered_shards" / f"g{g}", "filtered_shards", {},
                 [tmp_path / "raw_shards" / f"g{g}"])  # fmt: skip
            make(tmp_path / "minhash_signatures" / f"g{g}", "minhash_signatures", {},
                 [tmp_path / "filtered_shards" / f"g{g}"])  # fmt: skip
        make(tmp_path / "dedup_clusters", "dedup_clusters", {},
             [tmp_path / "minhash_signatures" / f"g{g}" for g in range(groups)])  # fmt: skip

    def reads(groups: int) -> tuple[int, int]:
        chain(groups)
        inputs = [str(tmp_path / "filtered_shards" / "g3"), str(tmp_path / "dedup_clusters")]
        mine, everything = own_group(store, "g3"), identity.Look()
        identity.compute("deduped_shards", "v1", {}, inputs, mine)
        identity.compute("deduped_shards", "v1", {}, inputs, everything)
        return mine.reads, everything.reads

    small, large = reads(10), reads(100)
    assert small[0] == large[0] <= 8  # its own chain and the clusters, at any size
    assert large[1] > 300  # the full check: every group's chain
    make(tmp_path / "minhash_signatures" / "g3", "minhash_signatures", {"again": 1},
         [tmp_path / "filtered_shards" / "g3"])  # fmt: skip
    inputs = [str(tmp_path / "filtered_shards" / "g3"), str(tmp_path / "dedup_clusters")]
    with pytest.raises(DataError, match="dedup_clusters.*is stale"):
        identity.compute("deduped_shards", "v1", {}, inputs, own_group(store, "g3"))
