"""Checkpoints on S3 (issue 15 item 4) against a real local endpoint (moto_server).

The trainer stages DCP locally, uploads every file and the commit record last; resume lists only
prefixes with a commit record, downloads and verifies before loading, and reproduces a local
run's losses bit for bit; keep-last-K, healthy labels, damaged-checkpoint fallback and the
consolidated load (what ``hf_export`` and eval use) work from S3.

    .venv/bin/pytest -q tests/unit/checkpoint/test_checkpoint_s3.py     # ~40 s on 2 cores
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main as cli_main
from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from pretrain.checkpoint import remote
from pretrain.errors import CheckpointError
from pretrain.train.config import TrainConfig
from tests.helpers.training import losses, make_config, make_packed, read_jsonl, run, torchrun
from tests.servers.s3_server import moto_s3

ROOT = "s3://campaign/runs"
# a real server (moto_server) and training runs: the slow tier
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with moto_s3() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_packed(tmp_path_factory.mktemp("packed") / "packed_tokens")


def s3_config(packed: Path, staging: Path, root: str, **kwargs: object) -> TrainConfig:
    cfg = make_config(packed, staging, **kwargs)  # type: ignore[arg-type]
    return cfg.replace(
        checkpoint=dataclasses.replace(cfg.checkpoint, run_root=root, staging_dir=str(staging))
    )


def test_save_prune_label_and_exact_resume_from_s3(
    s3: str, packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = f"{ROOT}/exact/runs"  # the run root of the artifact root {ROOT}/exact
    run(make_config(packed, tmp_path / "local"))  # the reference: 12 steps in one go, locally
    first = run(s3_config(packed, tmp_path / "stage", root, max_steps=8, keep_last=1))
    assert first.last_checkpoint == f"{root}/b00/step-00000008"
    # keep_last=1 pruned step 4 (record first, then files); nothing stays staged locally
    assert ckpt.list_checkpoints(root, "b00") == [f"{root}/b00/step-00000008"]
    assert storage.list_files(f"{root}/b00/step-00000004") == []
    assert not any(
        p.name.startswith(("step-", ".tmp-")) for p in (tmp_path / "stage/b00").iterdir()
    )
    record = ckpt.read_commit_record(first.last_checkpoint)
    names = {u.rsplit("/", 1)[-1] for u in storage.list_files(first.last_checkpoint)}
    assert set(record["files"]) == names - {storage.COMMITTED}
    assert {".metadata", "__0_0.distcp", "meta.json", "rng-rank00000.pt"} <= names

    ckpt.mark_healthy(first.last_checkpoint, reason="test")  # a label on S3 protects it
    assert ckpt.is_healthy(first.last_checkpoint)
    second = run(s3_config(packed, tmp_path / "stage2", root, keep_last=1))  # resume="latest"
    assert second.step == 12
    assert ckpt.list_checkpoints(root, "b00") == [
        f"{root}/b00/step-00000008",  # healthy: kept although keep_last=1
        f"{root}/b00/step-00000012",
    ]
    meta = ckpt.read_meta(f"{root}/b00/step-00000012")
    assert meta["lineage"]["parent"] == f"{root}/b00/step-00000008"
    capsys.readouterr()
    assert cli_main(["status", "--root", f"{ROOT}/exact"]) == 0  # `pretrain status` on S3
    status = capsys.readouterr().out
    assert "b00: 2 checkpoints, latest b00-s000000012" in status
    assert "healthy: step-00000008" in status
    straight, split = losses(tmp_path / "local"), losses(tmp_path / "stage2")
    assert [split[s] for s in range(9, 13)] == [straight[s] for s in range(9, 13)]
    # the consolidated model (eval, hf_export) loads from S3 and matches the local run's
    from_s3 = ckpt.load_consolidated_model(f"{root}/b00/step-00000012")
    local = ckpt.load_consolidated_model(str(tmp_path / "local/b00/step-00000012"))
    assert ckpt.weights_fingerprint(from_s3) == ckpt.weights_fingerprint(local)


def test_uncommitted_upload_is_never_picked_and_damage_falls_back(
    s3: str, packed: Path, tmp_path: Path
) -> None:
    root = f"{ROOT}/faults"
    run(s3_config(packed, tmp_path / "a", root, max_steps=8))  # steps 4 and 8 on S3
    # a crash mid-upload: step 12's files without its commit record
    half = f"{root}/b00/step-00000012"
    storage.write_bytes(b"partial shard", f"{half}/__0_0.distcp")
    assert ckpt.latest_checkpoint(root, "b00") == f"{root}/b00/step-00000008"
    # bit rot in step 8's shard on S3: resume verifies the download and falls back to step 4
    shard = f"{root}/b00/step-00000008/__0_0.distcp"
    blob = bytearray(storage.read_bytes(shard))
    blob[len(blob) // 2 : len(blob) // 2 + 4096] = bytes(
        b ^ 0xFF for b in blob[len(blob) // 2 : len(blob) // 2 + 4096]
    )
    storage.write_bytes(bytes(blob), shard)
    with pytest.raises(CheckpointError, match="__0_0.distcp: xxh3_64"):
        ckpt.load_consolidated_model(f"{root}/b00/step-00000008")
    result = run(s3_config(packed, tmp_path / "b", root, max_steps=8))
    assert result.step == 8 and result.last_checkpoint == f"{root}/b00/step-00000008"
    damaged = storage.read_json(f"{root}/b00/step-00000008/{remote.DAMAGED}")
    assert damaged["step"] == 8 and "xxh3_64" in damaged["problems"][0]
    # the rewritten step 8 is intact again, and the partial step 12 is still not a checkpoint
    cfg = s3_config(packed, tmp_path / "c", root)
    assert ckpt.local_copy(cfg.checkpoint, f"{root}/b00/step-00000008")[1] == []
    assert ckpt.list_checkpoints(root, "b00") == [
        f"{root}/b00/step-00000004",
        f"{root}/b00/step-00000008",
    ]


@pytest.mark.slow
def test_two_ranks_upload_their_own_files_and_resume_from_s3(
    s3: str, packed: Path, tmp_path: Path
) -> None:
    root = f"{ROOT}/fsdp"
    cfg = s3_config(packed, tmp_path / "stage", root, max_steps=8)
    (tmp_path / "run.json").write_text(cfg.to_json())
    torchrun(tmp_path / "run.json")
    record = ckpt.read_commit_record(f"{root}/b00/step-00000008")
    assert {"__0_0.distcp", "__1_0.distcp", "rng-rank00000.pt", "rng-rank00001.pt"} <= set(
        record["files"]
    )
    (tmp_path / "run12.json").write_text(
        s3_config(packed, tmp_path / "stage", root, max_steps=12).to_json()
    )
    torchrun(tmp_path / "run12.json")
    events = read_jsonl(tmp_path / "stage" / "b00" / "events.jsonl")
    started = [e for e in events if e["event"] == "started"]
    assert [e["start_step"] for e in started] == [0, 8]
    assert started[1]["resumed_from"] == f"{root}/b00/step-00000008"
    assert ckpt.latest_checkpoint(root, "b00") == f"{root}/b00/step-00000012"


def test_rollback_candidates_and_health_labels_on_s3(s3: str) -> None:
    """What the recovery sensors read and write (lineage across branches, HEALTHY labels)."""
    from pretrain.checkpoint.health import apply_health_labels, lineage_checkpoints

    root = f"{ROOT}/lineage"

    def make(branch: str, step: int, parent: str | None = None) -> str:
        uri = f"{root}/{branch}/step-{step:08d}"
        storage.write_json({"step": step, "lineage": {"parent": parent}}, f"{uri}/meta.json")
        storage.commit_marker(uri)
        return uri

    make("b00", 4)
    fork = make("b00", 8)
    make("b00", 12)  # after the fork point: not a candidate of b01
    make("b01", 10, parent=fork)
    infos = lineage_checkpoints(root, "b01")
    assert [(i.key, i.path) for i in infos] == [
        ("b00-s000000004", f"{root}/b00/step-00000004"),
        ("b00-s000000008", fork),
        ("b01-s000000010", f"{root}/b01/step-00000010"),
    ]
    assert apply_health_labels(infos, {"b00-s000000008": "healthy"}, reason="t") == [
        "b00-s000000008"
    ]
    assert ckpt.latest_healthy_checkpoint(root, "b00") == fork


def test_run_files_mirror_uploads_changes_and_a_new_node_continues_them(
    s3: str, tmp_path: Path
) -> None:
    """What the sensors read of an s3:// run (pretrain.train.mirror): the staging folder's
    JSONL and W&B files, under the same relative paths of the run root, uploaded whole and only
    when changed; a node that starts with an empty staging folder continues the JSONL files."""
    from pretrain.train.mirror import RunFilesMirror

    root = f"{ROOT}/mirror"
    cfg = make_config(Path("unused"), Path("unused"))
    node_a = cfg.replace(
        checkpoint=dataclasses.replace(
            cfg.checkpoint, run_root=root, staging_dir=str(tmp_path / "a")
        )
    )
    mirror = RunFilesMirror.for_config(node_a)
    assert mirror is not None and RunFilesMirror.for_config(cfg) is None  # local: nothing to do
    node_a.metrics_path().parent.mkdir(parents=True)
    node_a.metrics_path().write_text('{"step": 1}\n')
    wandb_file = tmp_path / "a" / "wandb" / f"offline-run-20260101_000000-{node_a.wandb_run_id()}"
    wandb_file.mkdir(parents=True)
    (wandb_file / f"run-{node_a.wandb_run_id()}.wandb").write_bytes(b":W&B\xe1\xbe\x00")
    written = mirror.sync()
    assert written == [
        f"{root}/b00/metrics.jsonl",
        f"{root}/wandb/{wandb_file.name}/run-{node_a.wandb_run_id()}.wandb",
    ]
    assert mirror.sync() == []  # nothing changed
    with node_a.metrics_path().open("a") as f:
        f.write('{"step": 2}\n')
    assert mirror.sync() == [f"{root}/b00/metrics.jsonl"]
    assert storage.read_bytes(f"{root}/b00/metrics.jsonl") == b'{"step": 1}\n{"step": 2}\n'

    node_b = node_a.replace(
        checkpoint=dataclasses.replace(node_a.checkpoint, staging_dir=str(tmp_path / "b"))
    )
    assert RunFilesMirror(node_b).restore() == [f"{root}/b00/metrics.jsonl"]
    assert node_b.metrics_path().read_bytes() == b'{"step": 1}\n{"step": 2}\n'
    assert RunFilesMirror(node_b).restore() == []  # the local copy is as long: kept
