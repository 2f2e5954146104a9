"""The data-value engine through Dagster, end to end (slow): partitions, a backfill, the sensor.

On the embedded corpus (2 shard groups as the experiment basis) a third group arrives: the
same documents with their words shuffled (every filter keeps them). Then, as the daemon would:

1. ``experiment_sensor`` asks for its token pool (and its floor: its words shuffled again),
   then for the 2 proxies (2 seeds) that the admission's anneal recipe continues, then
   registers the arms (with it, without, its floor, and the basis's reserve of clean prose,
   each continuing the proxy of its seed) and asks for them, then asks for ``data_admission``;
   one proxy trains through the real ``torchrun`` launcher, the others in process;
2. the decision is recorded with its evidence, judged on the user's target set of clean prose
   (``experiment_basis`` made with ``targets``): its relative value between the floor and the
   reference, or "cannot see"; an operator's review overrides it, and the sensor re-decides;
3. ``search_mixture`` registers a search's candidates (anneals of a start proxy, of a seed the
   admission did not use) and submits the start as ONE backfill of ``proxy_runs``; once it has
   run the sensor asks for the candidates (and the anchors: natural; uniform breaks a cap here), once they
   have run for the proxy that verifies the regression's proposal, then it fits
   ``mixture_search``;
4. ``data_mixture`` leaves the rejected group out and takes the searched weights
   (``weights_from: searched``), with lineage to both;
5. ``pretrain experiments list/compare`` and ``pretrain plan`` read it all back.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, SensorResult, build_sensor_context

from app.definitions import build_definitions
from foundation.partitions import band_partitions
from foundation.shards import plan_source, register_shards
from foundation.stages import run_configs
from pretrain import identity, storage
from pretrain.experiments import registry
from pretrain.experiments.admission import AdmissionConfig
from resources.storage import ArtifactStore
from sensors.experiments import experiment_sensor_for
from tests.helpers.pipelines import materialize_data_stages

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]
IN_PROCESS = run_configs({"proxy": {"in_process": True}})["proxy_runs_job"]
SEARCH = {"candidates": 6, "seeds": [2], "recipe": "proxy_tiny_anneal", "seed": 7}
ADMISSION = AdmissionConfig(recipe="proxy_tiny_anneal", seeds=(0, 1))
experiment_sensor = experiment_sensor_for(ADMISSION)


def _run(defs, instance, job: str, partition: str | None = None, run_config=None) -> None:
    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance, partition_key=partition, run_config=run_config or {}
    )
    assert result.success, (job, partition)


def _tick(instance: DagsterInstance, store: ArtifactStore):
    with build_sensor_context(instance=instance, resources={"store": store}) as context:
        result = experiment_sensor(context)
    if isinstance(result, SensorResult):
        for request in result.dynamic_partitions_requests:
            instance.add_dynamic_partitions(
                request.partitions_def_name, list(request.partition_keys)
            )
    return result


def _shuffled_group(root: Path, store: ArtifactStore) -> Path:
    """The basis groups' prose and licence texts with the words of each line shuffled (each line
    keeps its last word, and so its punctuation), as a new source folder."""
    rng = random.Random(0)
    folder = root / "incoming"
    folder.mkdir()
    with (folder / "shuffled.jsonl").open("w") as f:
        for group in ("embedded-0000", "embedded-0001"):
            docs = storage.read_table(store.uri("deduped_shards", group, "documents.parquet"))
            for text, source in zip(
                docs["text"].to_pylist(), docs["source"].to_pylist(), strict=True
            ):
                if source == "code":
                    continue
                lines = []
                for line in text.splitlines():
                    words = line.split()
                    head = words[:-1]
                    rng.shuffle(head)
                    lines.append(" ".join(head + words[-1:]))
                f.write(json.dumps({"text": "\n".join(lines)}) + "\n")
    return folder


def _clean_prose(root: Path, used: set[str]) -> str:
    """The user's yardstick: prose of installed packages the corpus did not take (their long
    descriptions), as a JSONL target file. The corpus holds too little prose for a reserve of
    its own, so half of it serves as the reference arm's clean prose."""
    from pretrain.data.harvest import discover_embedded
    from pretrain.data.readers import is_reject, iter_records

    where = root / "targets" / "clean_prose.jsonl"
    where.parent.mkdir()
    with where.open("w") as f:
        for raw in discover_embedded(max_files_per_source={"prose": 200, "code": 0, "license": 0}):
            if raw.source != "prose" or raw.uri in used:
                continue
            for record in iter_records(raw):
                if not is_reject(record) and len(record["text"]) > 400:
                    f.write(json.dumps({"text": record["text"]}) + "\n")
    return str(where)


def _manifest(store: ArtifactStore, key: str):
    from pretrain.data.raw import ShardManifest

    return ShardManifest.from_json(storage.read_bytes(store.manifest_uri(key)).decode())


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("experiments")
    root = str(base / "artifacts")
    store = ArtifactStore(root=root)
    defs = build_definitions(artifact_root=root, nproc_per_node=1, admission=ADMISSION)
    seen: dict = {}
    (base / "home").mkdir()
    with DagsterInstance.local_temp(str(base / "home")) as instance:
        keys = register_shards(
            instance, store, plan_source("embedded", max_shards=2, max_files_per_source=12)
        )
        materialize_data_stages(defs, instance, keys)
        for key in keys:
            _run(defs, instance, "deduped_shards_job", key)
        seen["idle"] = _tick(instance, store)  # no basis yet: nothing to compare to
        used = {f.uri for key in keys for f in _manifest(store, key).files}
        target = _clean_prose(base, used)
        # half of it tops up the reserve of prose (what a kind with no reserve gets anyway)
        basis = {"basis": {"targets": [{"name": "clean_prose", "uris": [target], "kind": "prose",
                                        "reference_share": 0.5}],
                           "min_yardstick_docs": 20}}  # fmt: skip
        _run(
            defs,
            instance,
            "experiment_basis_job",
            run_config=run_configs(basis)["experiment_basis_job"],
        )
        seen["basis"] = storage.read_json(store.uri("experiment_basis", "basis.json"))
        # a new shard group arrives and goes through the data stages
        [new] = register_shards(
            instance, store, plan_source(str(_shuffled_group(base, store)), source_name="prose",
                                         max_shards=1)
        )  # fmt: skip
        _run(defs, instance, "raw_shards_job", new)
        _run(defs, instance, "filtered_shards_job", new)
        _run(defs, instance, "minhash_signatures_job", new)
        for band in band_partitions.get_partition_keys():
            _run(defs, instance, "dedup_pairs_job", band)
        _run(defs, instance, "dedup_clusters_job")
        for key in [*keys, new]:
            _run(defs, instance, "deduped_shards_job", key)
        seen["new"] = new
        # 1. the sensor drives the admission
        pools = _tick(instance, store)
        seen["pool_requests"] = sorted(r.partition_key for r in pools.run_requests)
        for request in pools.run_requests:
            _run(defs, instance, request.job_name, request.partition_key)
        starts = _tick(instance, store)
        seen["start_requests"] = [(r.job_name, r.partition_key) for r in starts.run_requests]
        for request in starts.run_requests:
            _run(defs, instance, "proxy_runs_job", request.partition_key, IN_PROCESS)
        proxies = _tick(instance, store)
        seen["proxy_requests"] = [(r.job_name, r.partition_key) for r in proxies.run_requests]
        for i, request in enumerate(proxies.run_requests):  # the first through torchrun
            _run(
                defs,
                instance,
                "proxy_runs_job",
                request.partition_key,
                None if i == 0 else IN_PROCESS,
            )
        decide = _tick(instance, store)
        seen["decide_requests"] = [(r.job_name, r.partition_key) for r in decide.run_requests]
        seen["decide_config"] = decide.run_requests[0].run_config
        _run(defs, instance, "data_admission_job", new, decide.run_requests[0].run_config)
        seen["decision"] = storage.read_json(store.uri("data_admission", new, "decision.json"))
        seen["again"] = _tick(instance, store)  # everything current: nothing to do
        # 2. the operator overrides it from the Launchpad (the config's review)
        review = {
            "admission": {
                "recipe": ADMISSION.recipe,
                "seeds": list(ADMISSION.seeds),
                "review": {
                    "decision": "reject",
                    "reviewer": "ana",
                    "reason": "shuffled text: never useful",
                },
            }
        }
        _run(defs, instance, "data_admission_job", new, run_configs(review)["data_admission_job"])
        seen["reviewed"] = storage.read_json(store.uri("data_admission", new, "decision.json"))
        # 3. a mixture search: one backfill, then the sensor fits it
        search = {"search": SEARCH}
        _run(defs, instance, "launch_search", run_config=run_configs(search)["launch_search"])
        seen["backfills"] = instance.get_backfills()
        seen["backfilled"] = (
            seen["backfills"][0]
            .asset_backfill_data.target_subset.get_partitions_subset(AssetKey("proxy_runs"))
            .get_partition_keys()
        )
        for name in seen["backfilled"]:  # what the daemon's backfill loop would run
            _run(defs, instance, "proxy_runs_job", name, IN_PROCESS)
        candidates = _tick(instance, store)  # the start has run: the candidates are asked for
        names = [r.partition_key for r in candidates.run_requests]
        seen["candidate_jobs"] = {r.job_name for r in candidates.run_requests}
        for name in names:
            _run(defs, instance, "proxy_runs_job", name, IN_PROCESS)
        verify = _tick(instance, store)  # the proposal, trained before it is taken
        seen["verify"] = [(r.job_name, r.partition_key) for r in verify.run_requests]
        for _, name in seen["verify"]:
            _run(defs, instance, "proxy_runs_job", name, IN_PROCESS)
        fit = _tick(instance, store)
        seen["fit_requests"] = [r.job_name for r in fit.run_requests]
        (request,) = fit.run_requests
        _run(defs, instance, "mixture_search_job", run_config=request.run_config)
        seen["search"] = storage.read_json(store.uri("mixture_search", "search.json"))
        # 4. the mixture: the rejected group out, the searched weights in
        mixture = {"mixture": {"weights_from": "searched", "decontam": None}}
        _run(
            defs, instance, "data_mixture_job", run_config=run_configs(mixture)["data_mixture_job"]
        )
        seen["mixture"] = instance.get_latest_materialization_event(
            AssetKey("data_mixture")
        ).asset_materialization.metadata
        seen["mixture_identity"] = identity.read(store.uri("data_mixture"))
        seen["search_identity"] = identity.read(store.uri("mixture_search"))
    seen.update(root=root, store=store, names=names)
    return seen


def test_the_sensor_waits_for_a_basis(flow: dict) -> None:
    assert "experiment_basis is not materialized" in flow["idle"].skip_reason.skip_message


def test_the_sensor_drives_the_admission(flow: dict) -> None:
    new = flow["new"]
    assert new in flow["pool_requests"]
    starts = [spec.name for spec in registry.starts_of(ADMISSION.recipe, ADMISSION.seeds)]
    assert flow["start_requests"] == [("proxy_runs_job", n) for n in starts]  # first, alone
    jobs = {job for job, _ in flow["proxy_requests"]}
    assert jobs == {"proxy_runs_job"} and len(flow["proxy_requests"]) == 8  # 2 seeds x 4 arms
    arms = [registry.load_spec(flow["root"], name) for _, name in flow["proxy_requests"]]
    assert sorted(a.base for a in arms) == sorted(starts * 4)  # each arm continues its seed's
    assert sorted({a.label for a in arms}) == ["base", "floor", "reference", "with"]
    reference = [a for a in arms if a.label == "reference"]
    assert {a.variant.include_groups for a in reference} == {("reserve:prose",)}
    first = registry.read_result(registry.result_dir(flow["root"], arms[0].name))
    assert first is not None and first.checkpoint  # and kept its own final checkpoint
    assert flow["decide_requests"] == [("data_admission_job", new)]
    # the decision reads the experiments the sensor ran: with the sensor's recipe, not the default
    [op] = flow["decide_config"]["ops"].values()
    assert op["config"]["recipe"] == ADMISSION.recipe
    assert "no shard group awaiting" in flow["again"].skip_reason.skip_message


def test_the_decision_is_recorded_with_its_evidence(flow: dict) -> None:
    decision = flow["decision"]
    assert (
        decision["decision"] in ("admit", "hold", "reject") and decision["decided_by"] == "policy"
    )
    evidence = decision["evidence"]
    assert "mean" in evidence["delta_bpb"] and len(evidence["delta_bpb"]) >= 3  # 2+ sources
    assert len(evidence["seeds"]) == 2
    # judged on the user's target of its kind, against its floor and clean prose
    assert decision["yardstick"] == "target:clean_prose" and evidence["kind"] == "prose"
    assert set(evidence["changes"]) == {"with", "floor", "reference"}
    # how often the reference arm read its reserve, from the basis's reserve of prose
    assert evidence["reserve_tokens"] == flow["basis"]["reserve"]["prose"]
    assert evidence["reference_epochs"] > 0
    # half the reference is the target it is judged on: the decision says so
    assert evidence["reference_from"] == ["clean_prose"]
    assert any("part of the reference is target clean_prose" in w for w in decision["warnings"])
    if decision["cannot_see"]:
        assert "cannot separate clean from damaged" in decision["reason"]
        assert decision["next_recipe"] == "proxy_cpu_anneal"  # proxy_tiny_anneal's next scale
    else:
        assert "relative value" in decision["reason"] and decision["relative"]["value"] <= 0.3
        assert decision["decision"] == "reject"  # shuffled words: worth their floor
    basis = flow["basis"]
    assert basis["targets"] == {"clean_prose": "prose"} and basis["reserve"]["prose"] > 0
    assert basis["reserve_from"] == {"prose": ["clean_prose"]}
    assert basis["yardsticks"]["target:clean_prose"]["documents"] > 20
    assert not [w for w in basis["warnings"].get("target:clean_prose", []) if "documents" in w]
    assert decision["noise"]["documents"] > 0 and 0 <= decision["noise"]["risk"] <= 1
    assert 0 <= decision["corpus_noise"]["risk"] <= 1  # the admitted groups' funnel
    assert decision["cost"]["cpu_seconds"] > 0 and decision["cost"]["raw_bytes_total"] > 0


def test_an_operator_review_overrides_the_policy(flow: dict) -> None:
    reviewed = flow["reviewed"]
    assert reviewed["decision"] == "reject" and reviewed["decided_by"] == "ana"
    assert reviewed["review"]["reason"].startswith("shuffled")
    assert reviewed["policy_decision"] == flow["decision"]["policy_decision"]


def test_a_search_is_one_backfill_then_a_fit(flow: dict) -> None:
    [backfill] = flow["backfills"]
    [start] = registry.starts_of(SEARCH["recipe"], SEARCH["seeds"])
    assert list(flow["backfilled"]) == [start.name] and backfill.tags["pretrain/search"]
    anchors = flow["search"]["anchors"]  # uniform breaks a cap here: the licences are small
    assert set(anchors) == {"natural"}
    assert len(flow["names"]) == SEARCH["candidates"] + 1 and flow["candidate_jobs"] == {
        "proxy_runs_job"
    }
    for name in flow["names"]:
        assert registry.load_spec(flow["root"], name).base == start.name
    [(job, check)] = flow["verify"]
    assert job == "proxy_runs_job" and registry.load_spec(flow["root"], check).label == "proposal"
    assert flow["fit_requests"] == ["mixture_search_job"]
    search = flow["search"]
    assert len(search["candidates"]) == SEARCH["candidates"] + 1
    proposal = search["proposal"]
    assert proposal["chosen_by"] in ("verified", "measured") and "measured" in proposal
    best = min(c["target"] for c in search["candidates"])
    if proposal["chosen_by"] == "verified":
        assert proposal["measured"] < best and proposal["weights"] == search["regression_proposal"]
    else:
        assert proposal["weights"] == search["best_candidate"]["weights"]
    assert set(search["heldout_spearman"]) == {"lightgbm", "linear"}
    weights = search["proposal"]["weights"]
    assert abs(sum(weights.values()) - 1) < 1e-6 and set(weights) == set(search["sources"])


def test_the_mixture_takes_the_decisions(flow: dict) -> None:
    metadata = flow["mixture"]
    assert flow["new"] in metadata["groups_left_out"].value
    assert metadata["weights_from"].value == "searched"
    inputs = flow["mixture_identity"].inputs
    assert inputs[flow["store"].uri("mixture_search")] == flow["search_identity"].version
    assert not any(flow["new"] in uri for uri in inputs)


def test_the_cli_reads_experiments_back(flow: dict) -> None:
    def cli(*args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", *args], cwd=ROOT, text=True,
            capture_output=True,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout

    listing = cli("experiments", "--root", flow["root"], "list", "--kind", "search")
    assert listing.count("proxy_tiny") == SEARCH["candidates"] + 2  # natural, the verification
    compare = cli("experiments", "--root", flow["root"], "compare", "--group", flow["new"])
    assert "with" in compare and "without" in compare and "mean bpb" in compare
    assert "floor" in compare and "reference" in compare and "target:clean_prose" in compare
    assert "decision: reject on target:clean_prose" in compare  # the operator's review stands
    plan = cli("plan", "--root", flow["root"], "--gpus", "8", "--days", "1")
    assert "proxy experiments under" in plan and "% of the campaign" in plan
    specs = registry.list_specs(flow["root"])
    assert {s.kind for s in specs} == {"admission", "search", "start"}
