"""The whole asset graph, materialized through Dagster on a tiny corpus in a temp DAGSTER_HOME.

One module-scoped campaign (the demo driver, real torchrun with 2 gloo processes) and one test
per property a user relies on: counts reconcile, planted duplicates are gone, the tokenizer
round-trips, packed tokens equal tokenized tokens, loss goes down, a checkpoint reloads to the
trained weights, and the eval report is finite. The campaign runs with the options of the
README's settings example (``pretrain demo --filter.heuristics.max_chars ...``): this is the
test that runs that README command (tests/dagster/test_readme_commands.py).
"""

import gzip
import json
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
)

from app.definitions import build_definitions
from app.demo import parse_args, run_demo
from pretrain import identity, storage
from pretrain.checks import count_rows
from pretrain.data.harvest import discover_embedded
from pretrain.data.readers import iter_records
from resources.metrics import RecoveryThresholds
from resources.storage import ArtifactStore
from sensors.backfill_schedule import shard_backfill_schedule
from sensors.eval_sensor import eval_sensor
from tests.helpers.readme import readme_command
from tests.helpers.shared_data import SHARED_EVAL

pytestmark = pytest.mark.slow  # the whole graph through Dagster: minutes

ROOT = Path(__file__).resolve().parents[2]
MAX_FILES = 40
STEPS = 30
# the README's example of stage settings: its options, at the campaign's scale
README_SETTINGS = readme_command(".venv/bin/pretrain demo --filter.").argv[2:]


def plant_duplicates(folder: Path) -> dict[str, str]:
    """Copies of two harvested stdlib files: one exact, one with three words changed."""
    code = [f for f in discover_embedded(max_files_per_source=MAX_FILES) if f.source == "code"]
    originals = []
    for raw in code:
        record = next(iter_records(raw))
        if len(record.get("text") or "") > 4000:
            originals.append(record)
        if len(originals) == 2:
            break
    exact, near = originals
    words = near["text"].split(" ")
    for i in (100, 200, 300):
        words[i] = words[i] + "_edited"
    folder.mkdir(parents=True)
    with gzip.open(folder / "planted.jsonl.gz", "wt") as f:
        f.write(json.dumps({"text": exact["text"], "url": "planted://exact"}) + "\n")
        f.write(json.dumps({"text": " ".join(words), "url": "planted://near"}) + "\n")
    return {"planted://exact": exact["url"], "planted://near": near["url"]}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("campaign")
    home = base / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "config" / "dagster.yaml", home / "dagster.yaml")
    pairs = plant_duplicates(base / "planted")
    root = str(base / "artifacts")
    args = parse_args(
        [
            "--artifact-root", root,
            "--max-files-per-source", str(MAX_FILES),
            "--shards", "2",
            "--steps", str(STEPS),
            "--vocab-size", "1024",
            "--seq-len", "128",
            "--add-source", f"code={base / 'planted'}",
            *README_SETTINGS,
        ]
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        # eval tasks: the shared copies where present; the Hub fetch fails fast (nothing listens)
        evals = SHARED_EVAL if SHARED_EVAL.is_dir() else base / "ev"
        mp.setenv("PRETRAIN_EVAL_DIR", str(evals))
        mp.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
        results = run_demo(args)
        instance = DagsterInstance.get()
        checks = {
            str(key): instance.event_log_storage.get_latest_asset_check_execution_by_key([key])
            for key in _check_keys(instance)
        }
        repository = build_definitions(artifact_root=root).get_repository_def()
        schedule_context = build_schedule_context(instance=instance, repository_def=repository)
        backfill = shard_backfill_schedule(schedule_context)
        # the daemon's first eval_sensor tick after the demo (issue 26, section 4)
        with build_sensor_context(
            instance=instance, repository_def=repository,
            resources={"store": ArtifactStore(root=root), "recovery": RecoveryThresholds()},
        ) as context:  # fmt: skip
            eval_tick = eval_sensor(context)
        checkpoint_keys = instance.get_dynamic_partitions("checkpoints")
        materialized = instance.get_materialized_partitions(AssetKey("checkpoints"))
        observed = instance.fetch_observations(AssetKey("checkpoints"), limit=10).records
        loss_curves = {
            r.partition_key: r.asset_observation.metadata["loss_curve_md"].value
            for r in observed
            if "loss_curve_md" in r.asset_observation.metadata
        }
        data_versions = {
            key.to_user_string(): [
                (r.partition_key, r.asset_materialization.tags.get("dagster/data_version"))
                for r in instance.fetch_materializations(key, limit=1000).records
            ]
            for key in build_definitions().resolve_asset_graph().get_all_asset_keys()
        }
    return {
        "data_versions": data_versions,
        "loss_curves": loss_curves,
        "results": results,
        "root": root,
        "pairs": pairs,
        "checks": checks,
        "checkpoint_keys": checkpoint_keys,
        "checkpoints_materialized": materialized,
        "backfill": backfill,
        "eval_tick": eval_tick,
    }


def _check_keys(instance: DagsterInstance) -> list:
    return list(build_definitions().resolve_asset_graph().asset_check_keys)


def _shards(root: str) -> list[str]:
    return sorted(p.name for p in Path(root, "raw_shards").iterdir())


def _table(root: str, *parts: str) -> pa.Table:
    return storage.read_table(storage.join(root, *parts))


def test_every_asset_check_passed(campaign: dict) -> None:
    # checkpoints:healthy is evaluated by the loss-spike sensor, which the demo does not run
    executions = {k: v for k, v in campaign["checks"].items() if "checkpoints" not in k}
    assert len(executions) >= 12
    for key, latest in executions.items():
        (execution,) = latest.values()
        assert execution.status.value == "SUCCEEDED", key
        assert execution.evaluation.passed, (key, execution.evaluation.description)


def test_the_readme_settings_reach_their_stages(campaign: dict) -> None:
    options = dict(zip(README_SETTINGS[::2], README_SETTINGS[1::2], strict=True))
    mixture = json.loads(Path(campaign["root"], "data_mixture", "mixture.json").read_text())
    weights = json.loads(options["--mixture.weights"])
    assert mixture["stages"][0]["target_shares"] == pytest.approx(weights)
    (launched,) = Path(campaign["root"], "runs", "b00").glob("run-*.json")
    optim = json.loads(launched.read_text())["optim"]
    assert optim["lr"] == float(options["--train.optim.lr"])


def test_counts_reconcile_at_every_stage(campaign: dict) -> None:
    root = campaign["root"]
    shards = _shards(root)
    assert len(shards) == 3  # two embedded shard groups + the planted source
    for shard in shards:
        raw = count_rows(storage.join(root, "raw_shards", shard, "documents.parquet"))
        kept = count_rows(storage.join(root, "filtered_shards", shard, "documents.parquet"))
        rejected = count_rows(storage.join(root, "filtered_shards", shard, "rejects.parquet"))
        assert raw == kept + rejected and kept > 0
        deduped = count_rows(storage.join(root, "deduped_shards", shard, "documents.parquet"))
        removed = count_rows(storage.join(root, "deduped_shards", shard, "rejects.parquet"))
        assert kept == deduped + removed
    reasons = _table(root, "filtered_shards", shards[0], "rejects.parquet").column("reason")
    assert all(r for r in reasons.to_pylist())


def test_planted_duplicates_are_removed(campaign: dict) -> None:
    root = campaign["root"]
    kept, rejects = [], []
    for shard in _shards(root):
        kept.append(_table(root, "deduped_shards", shard, "documents.parquet"))
        rejects.append(_table(root, "deduped_shards", shard, "rejects.parquet"))
    kept_urls = set(pa.concat_tables(kept).column("url").to_pylist())
    removed = pa.concat_tables(rejects).to_pylist()
    by_url = {r["url"]: r for r in removed}
    expected_reason = {"planted://exact": "exact_duplicate", "planted://near": "near_duplicate"}
    for planted, original in campaign["pairs"].items():
        assert (planted in kept_urls) != (original in kept_urls), planted
        loser = by_url[planted] if planted in by_url else by_url[original]
        assert loser["reason"] == expected_reason[planted]
        assert loser["detail"]  # the id of the document that was kept


def test_tokenizer_round_trips_exactly(campaign: dict) -> None:
    from pretrain.tokenizer import load_tokenizer

    tok = load_tokenizer(storage.join(campaign["root"], "tokenizer", "tokenizer.json"))
    texts = _table(campaign["root"], "data_mixture", "val.parquet").column("text").to_pylist()
    texts += ["  def f(x):\n\treturn x ** 2  # ünïcödé, 中文, emoji 🚀\r\n"]
    assert all(tok.decode(tok.encode(t).ids, skip_special_tokens=False) == t for t in texts)
    assert tok.get_vocab_size() == 1024


def test_packed_tokens_equal_tokenized_tokens(campaign: dict) -> None:
    from pretrain.tokenizer import load_tokenizer

    root = campaign["root"]
    tok = load_tokenizer(storage.join(root, "tokenizer", "tokenizer.json"))
    index = storage.read_json(storage.join(root, "packed_tokens", "index.json"))
    tokenized = 0
    for split in ("train", "val"):
        texts = _table(root, "data_mixture", f"{split}.parquet").column("text").to_pylist()
        tokenized += sum(len(e.ids) + 1 for e in tok.encode_batch(texts))  # + EOS per document
    assert tokenized == index["tokens_tokenized"]
    on_disk = sum(
        Path(root, "packed_tokens", f["file"]).stat().st_size // 2
        for split in ("train", "val")
        for f in index["splits"][split]["files"]
    )
    packed = index["splits"]["train"]["num_tokens"] + index["splits"]["val"]["num_tokens"]
    assert on_disk == packed and packed <= tokenized
    assert tokenized - packed < 128 * (1 + len(index["splits"]["val"]["files"]))  # only tails


def test_training_loss_decreases(campaign: dict) -> None:
    rows = [
        json.loads(line) for line in Path(campaign["root"], "runs", "b00", "metrics.jsonl").open()
    ]
    losses = {r["step"]: r["loss"] for r in rows if "loss" in r}
    assert sorted(losses) == list(range(1, STEPS + 1))
    first, last = [losses[s] for s in range(1, 6)], [losses[s] for s in range(STEPS - 4, STEPS + 1)]
    assert sum(last) / 5 < sum(first) / 5 - 0.5


def test_checkpoint_reloads_to_identical_weights(campaign: dict) -> None:
    from pretrain.checkpoint.dcp import (
        checkpoint_dir_for_key,
        load_consolidated_model,
        read_meta,
        weights_fingerprint,
    )

    key = campaign["results"]["final_checkpoint"]
    ckpt = checkpoint_dir_for_key(storage.join(campaign["root"], "runs"), key)
    model = load_consolidated_model(str(ckpt))
    saved = read_meta(ckpt)["weights_fingerprint"]  # computed from the live FSDP2 shards
    assert weights_fingerprint(model) == saved and len(saved) > 10


def test_eval_report_is_finite(campaign: dict) -> None:
    key = campaign["results"]["final_checkpoint"]
    assert key == f"b00-s{STEPS:09d}"
    report = storage.read_json(storage.join(campaign["root"], "eval_reports", key, "report.json"))
    metadata = campaign["results"]["eval"]["eval_reports"]
    assert math.isfinite(metadata["perplexity"]) and 1 < metadata["perplexity"] < 1024
    assert json.dumps(report)  # plain JSON
    assert Path(campaign["root"], "eval_reports", key, "report.md").read_text().strip()


def test_checkpoints_are_materialized_partitions(campaign: dict) -> None:
    keys, materialized = campaign["checkpoint_keys"], campaign["checkpoints_materialized"]
    assert f"b00-s{STEPS:09d}" in keys and len(keys) >= 4
    assert set(keys) == materialized  # every checkpoint key was reported while training ran
    # the training op put the campaign's loss curve on its newest checkpoint, visible in the UI
    assert "data:image/png;base64," in campaign["loss_curves"][f"b00-s{STEPS:09d}"]


def test_backfill_schedule_finds_every_shard_current(campaign: dict) -> None:
    backfill = campaign["backfill"]
    assert isinstance(backfill, SkipReason)
    assert backfill.skip_message == "all 3 shards are current"


def test_eval_sensor_after_the_demo_evaluates_nothing_again(campaign: dict) -> None:
    """The demo evaluated every checkpoint in process: the sensor's first tick must not."""
    tick = campaign["eval_tick"]
    assert tick.run_requests == [], [r.partition_key for r in tick.run_requests]
    kept = campaign["results"]["final_checkpoint"]  # and the others still on disk
    assert (
        "evaluated already" in tick.skip_reason.skip_message
        and kept in tick.skip_reason.skip_message
    )


def test_cli_status_and_export_read_the_campaign(
    campaign: dict, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    from app.cli import main

    key = campaign["results"]["final_checkpoint"]
    assert main(["status", "--root", campaign["root"]]) == 0
    out = capsys.readouterr().out
    assert f"latest {key}" in out and out.startswith("b00: ")
    assert main(["export", key, str(tmp_path / "export"), "--root", campaign["root"]]) == 0
    assert (tmp_path / "export" / "config.json").exists()


def test_every_output_carries_its_identity(campaign: dict) -> None:
    """Every materialization the demo made has a data version, and it is the identity recorded
    next to the output: a checkpoint's own, and every stage's ``_identity.json``."""
    versions = campaign["data_versions"]
    made = {asset: events for asset, events in versions.items() if events}
    assert {"scaling_plan", "dedup_pairs", "eval_reports", "eval_comparison", "hf_export"} <= set(
        made
    )
    assert "checkpoints" in made
    for asset, events in made.items():
        for partition, version in events:
            assert version, (asset, partition)
    root = campaign["root"]
    for asset in ("scaling_plan", "eval_comparison"):
        [(_, version)] = made[asset][:1]
        assert identity.read(storage.join(root, asset)).version == version
    for asset in ("eval_reports", "hf_export", "dedup_pairs"):
        partition, version = made[asset][0]
        assert identity.read(storage.join(root, asset, partition)).version == version
    key, version = made["checkpoints"][0]
    branch, _, step = key.rpartition("-s")
    checkpoint = storage.join(root, "runs", branch, f"step-{int(step):08d}")
    assert identity.read(checkpoint).version == version
    meta = storage.read_json(storage.join(checkpoint, "meta.json"))
    assert (
        meta["lineage"]["packed_tokens_version"]
        == identity.read(storage.join(root, "packed_tokens")).version
    )
    assert len(meta["lineage"]["config_sha256"]) == 64
