"""A checkpoint folder cannot run code, and ``pretrain status`` never calls a damaged one latest
(issue 26, items 1 and 2).

DCP stores each non-tensor value of a state dict (the optimizer's ``param_groups``: learning
rate, betas, ...) as a ``torch.save`` blob, and torch's ``DefaultLoadPlanner`` loads it with
``weights_only=False``. Each test plants what someone with write access to a run root could: an
object whose ``__reduce__`` calls ``os.system`` (touching a marker file), appended to a real
checkpoint's ``__0_0.distcp``, an entry of ``.metadata`` pointed at it, and the commit record's
sizes and checksums rewritten to match, so verification passes. Stock DCP runs the command (the
first test proves the plant is live); every load of ours — the trainer's resume (in process and
under torchrun), the consolidated model that eval, export, quarantine scoring and the Hugging
Face export use, and an ``s3://`` checkpoint — refuses it with a ``CheckpointError`` naming the
file, and the marker never appears; ``pretrain export`` says so in one line and exits 1. A
commit record naming ``../`` files is refused before a download can write outside its folder.
``pretrain status`` verifies every checkpoint (local and on S3) against its record and marks the
damaged ones::

    .venv/bin/pytest -q tests/unit/checkpoint/test_checkpoint_trust.py            # ~40 s on 2 cores
    .venv/bin/pytest -q tests/unit/checkpoint/test_checkpoint_trust.py -m slow    # + the torchrun resume
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import BytesStorageMetadata, MetadataIndex

from app.cli import main as cli_main
from pretrain import storage
from pretrain.checkpoint import dcp as ckpt
from pretrain.checkpoint import integrity, remote
from pretrain.checkpoint.safe_dcp import SafeFileSystemReader, load_state
from pretrain.errors import CheckpointError
from tests.helpers.checkpoints import flip_4k
from tests.helpers.training import (
    make_config,
    make_packed,
    read_jsonl,
    run,
    run_torchrun,
)
from tests.servers.s3_server import moto_s3

STEP8 = "b00/step-00000008"
LR = "optim.param_groups.0.lr"
REFUSED = r"step-00000008/__0_0\.distcp: entry '{}' holds more than tensors and plain data"


class RunsCommand:
    """Unpickling this runs a shell command: what an attacker's object would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def plant(step_dir: Path, fqn: str, obj: object) -> None:
    """Append ``torch.save(obj)`` to the shard holding ``fqn``, point ``fqn``'s entry in
    ``.metadata`` at it (as a byte entry: a tensor entry becomes one) and rewrite the commit
    record so that the sizes and checksums match again."""
    meta_file = step_dir / ".metadata"
    metadata = pickle.loads(meta_file.read_bytes())  # our own test data: plain pickle is fine
    indexes = [i for i in metadata.storage_data if i.fqn == fqn]
    info = metadata.storage_data[indexes[0]]
    blob = io.BytesIO()
    torch.save(obj, blob)
    shard = step_dir / info.relative_path
    offset = shard.stat().st_size
    with shard.open("ab") as f:
        f.write(blob.getvalue())
    for index in indexes:
        del metadata.storage_data[index]
    info.offset, info.length = offset, len(blob.getvalue())
    metadata.storage_data[MetadataIndex(fqn)] = info
    metadata.state_dict_metadata[fqn] = BytesStorageMetadata()
    meta_file.write_bytes(pickle.dumps(metadata))
    match_record(step_dir, [".metadata", info.relative_path])


def match_record(step_dir: Path, names: list[str]) -> None:
    """Rewrite the commit record's sizes and checksums of ``names``: verification passes."""
    record = ckpt.read_commit_record(step_dir)
    record["files"].update(integrity.digest_files(step_dir, names))
    storage.write_json(record, str(step_dir / storage.COMMITTED))
    assert ckpt.checkpoint_problems(step_dir) == []


def nested(fqn: str, value: object = 0.0) -> dict[str, Any]:
    """The state dict that asks for ``fqn`` alone (DCP flattens it back to ``fqn``)."""
    group = "optim.param_groups.0."
    if fqn.startswith(group):
        return {"optim": {"param_groups": [{fqn.removeprefix(group): value}]}}
    head, rest = fqn.split(".", 1)
    return {head: {rest: value}}


def stock_dcp_load(step_dir: Path, fqn: str) -> None:
    """``fqn`` loaded the way torch's own planner does (``weights_only=False``)."""
    reader = SafeFileSystemReader(str(step_dir))  # our .metadata allowlist is not the issue
    dcp.load(nested(fqn), storage_reader=reader, planner=DefaultLoadPlanner(), no_dist=True)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(packed dir, run root with committed checkpoints at steps 4 and 8)."""
    base = tmp_path_factory.mktemp("trust")
    packed = make_packed(base / "packed_tokens")
    run(make_config(packed, base / "runs", max_steps=8))
    return packed, base / "runs"


@pytest.fixture
def copy(trained: tuple[Path, Path], tmp_path: Path) -> Path:
    shutil.copytree(trained[1], tmp_path / "runs")
    return tmp_path / "runs"


def test_every_byte_entry_of_a_genuine_checkpoint_is_plain_data(
    trained: tuple[Path, Path],
) -> None:
    step8 = trained[1] / STEP8
    metadata = SafeFileSystemReader(str(step8)).read_metadata()
    byte_entries = [
        k.split(".")[2:]
        for k, v in metadata.state_dict_metadata.items()
        if isinstance(v, BytesStorageMetadata)
    ]
    # AdamW's two parameter groups (with and without weight decay), every setting an entry
    assert {(group, name) for group, name in byte_entries} >= {("0", "lr"), ("1", "params")}
    groups: list[dict[str, Any]] = [{}, {}]
    for group, name in byte_entries:
        groups[int(group)][name] = "not loaded"
    state: dict[str, Any] = {"optim": {"param_groups": groups}}
    load_state(state, str(step8), no_dist=True)  # every one loads with weights_only=True
    decay, no_decay = state["optim"]["param_groups"]
    assert len(byte_entries) == len(decay) + len(no_decay) and "not loaded" not in [
        *decay.values(),
        *no_decay.values(),
    ]
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.1, 0.0)  # OptimConfig's
    assert tuple(decay["betas"]) == (0.9, 0.95) and 0 < decay["lr"] <= 3e-3  # make_config's
    assert all(p.startswith(("tok_embed", "layers.")) for p in decay["params"])


def test_a_planted_optimizer_entry_runs_code_in_stock_dcp_and_is_refused_by_ours(
    trained: tuple[Path, Path], copy: Path, tmp_path: Path
) -> None:
    step8 = copy / STEP8
    marker = tmp_path / "code-ran"
    plant(step8, LR, RunsCommand(marker))
    # the plant is live: torch's own planner runs the command
    stock_dcp_load(step8, LR)
    assert marker.exists()
    marker.unlink()
    # a direct library load of that entry is refused, naming the file and the entry
    with pytest.raises(CheckpointError, match=REFUSED.format(LR) + r" \(.*GLOBAL posix\.system"):
        load_state(nested(LR), str(step8), no_dist=True)
    # and so is a real resume through the trainer (resume="latest": step 8, verified intact)
    with pytest.raises(CheckpointError, match=REFUSED.format(LR)):
        run(make_config(trained[0], copy, max_steps=12))
    assert not marker.exists()
    assert ckpt.latest_checkpoint(copy, "b00") == step8  # nothing trained past it


def test_a_model_entry_turned_into_a_byte_entry_is_refused_by_every_consolidated_load(
    trained: tuple[Path, Path], copy: Path, tmp_path: Path
) -> None:
    """eval, both exports and quarantine scoring load the model alone: a weight whose metadata
    says "bytes" would reach the same unpickling."""
    step8 = copy / STEP8
    name = next(
        k
        for k in SafeFileSystemReader(str(step8)).read_metadata().state_dict_metadata
        if k.startswith("model.")
    )
    marker = tmp_path / "code-ran"
    plant(step8, name, RunsCommand(marker))
    stock_dcp_load(step8, name)
    assert marker.exists()
    marker.unlink()
    with pytest.raises(CheckpointError, match=REFUSED.format(name)):
        ckpt.load_consolidated_model(str(step8))
    assert not marker.exists()


def test_an_entry_pointing_outside_the_checkpoint_is_refused(copy: Path) -> None:
    step8 = copy / STEP8
    metadata = pickle.loads((step8 / ".metadata").read_bytes())
    index = next(i for i in metadata.storage_data if i.fqn == LR)
    metadata.storage_data[index].relative_path = "../step-00000004/__0_0.distcp"
    (step8 / ".metadata").write_bytes(pickle.dumps(metadata))
    match_record(step8, [".metadata"])
    with pytest.raises(CheckpointError, match=f"entry '{LR}' points at '../step-00000004/"):
        ckpt.load_consolidated_model(str(step8))


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with moto_s3() as endpoint:
        yield endpoint


def test_a_planted_checkpoint_on_s3_is_refused_after_the_download(
    s3: str, trained: tuple[Path, Path], copy: Path, tmp_path: Path
) -> None:
    step8 = copy / STEP8
    metadata = SafeFileSystemReader(str(step8)).read_metadata()
    name = next(k for k in metadata.state_dict_metadata if k.startswith("model."))
    marker = tmp_path / "code-ran"
    plant(step8, name, RunsCommand(marker))
    uri = "s3://campaign/trust/runs/b00/step-00000008"
    record = ckpt.read_commit_record(step8)
    remote.upload_files(step8, sorted(record["files"]), uri)
    remote.commit(uri, {k: v for k, v in record.items() if k != "committed"})
    assert ckpt.list_checkpoints("s3://campaign/trust/runs", "b00") == [uri]
    with pytest.raises(CheckpointError, match=REFUSED.format(name)):
        ckpt.load_consolidated_model(uri)
    assert not marker.exists()


def test_a_commit_record_naming_a_file_outside_the_checkpoint_is_not_downloaded(
    s3: str, copy: Path, tmp_path: Path
) -> None:
    """A download writes every file the record lists: '../' in a name would write anywhere."""
    step8 = copy / STEP8
    uri = "s3://campaign/escape/runs/b00/step-00000008"
    record = ckpt.read_commit_record(step8)
    remote.upload_files(step8, sorted(record["files"]), uri)
    escape = "../../escape.pth"  # from <dl>/.partial-step-00000008 to tmp_path: a .pth runs
    payload = b"import os  # a .pth file's import lines run at every interpreter start"
    storage.write_bytes(payload, f"{uri}/{escape}")  # S3 stores it as .../runs/escape.pth
    files = {**record["files"], escape: {"size": len(payload), "xxh3_64": "0"}}
    remote.commit(uri, {**{k: v for k, v in record.items() if k != "committed"}, "files": files})
    with pytest.raises(
        CheckpointError, match=r"not downloaded: the commit record lists '\.\./\.\./"
    ):
        remote.download_checkpoint(uri, tmp_path / "dl" / "step-00000008")
    assert not (tmp_path / "escape.pth").exists() and not (tmp_path / "dl").exists()
    assert ckpt.checkpoint_problems(uri, checksums=False)[0].startswith(
        "the commit record lists '../../escape.pth', not a checkpoint file"
    )


def test_status_marks_damaged_checkpoints_and_never_calls_one_latest(
    copy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    root = str(copy.parent)  # the artifact root: runs/ is under it
    flip_4k(copy / STEP8 / "__0_0.distcp")  # bit rot: sizes still match the record
    assert cli_main(["status", "--root", root]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("b00: 2 checkpoints (1 DAMAGED), latest b00-s000000004 (tokens")
    assert out[1].startswith("b00: DAMAGED checkpoint step-00000008: __0_0.distcp: xxh3_64 ")
    assert out[1].endswith("(resume passes over it and sets it aside; inspect or delete it)")
    assert len(out) == 2
    # sizes only reads nothing, so bit rot stays unseen, and the line says what was checked
    assert cli_main(["status", "--root", root, "--sizes-only"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("b00: 2 checkpoints, latest b00-s000000008 (tokens seen")
    assert out[0].endswith("[sizes checked, not checksums]") and len(out) == 1
    os.truncate(copy / "b00/step-00000004/__0_0.distcp", 100)  # now both are damaged
    assert cli_main(["status", "--root", root]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("b00: 2 checkpoints (2 DAMAGED), none intact: resume=latest has")
    assert "step-00000004: __0_0.distcp: 100 bytes, the commit record says" in out[1]
    assert out[2].startswith("b00: DAMAGED checkpoint step-00000008: __0_0.distcp: xxh3_64 ")


def test_status_verifies_checkpoints_on_s3(
    s3: str, copy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    root = "s3://campaign/status"
    for step in (4, 8):
        local = copy / f"b00/step-{step:08d}"
        record = ckpt.read_commit_record(local)
        uri = f"{root}/runs/b00/step-{step:08d}"
        remote.upload_files(local, [*sorted(record["files"])], uri)
        remote.commit(uri, {k: v for k, v in record.items() if k != "committed"})
    shard = f"{root}/runs/b00/step-00000008/__0_0.distcp"
    blob = bytearray(storage.read_bytes(shard))
    blob[100:104] = bytes(b ^ 0xFF for b in blob[100:104])
    storage.write_bytes(bytes(blob), shard)
    assert cli_main(["status", "--root", root]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("b00: 2 checkpoints (1 DAMAGED), latest b00-s000000004")
    assert out[1].startswith("b00: DAMAGED checkpoint step-00000008: __0_0.distcp: xxh3_64 ")


def test_pretrain_export_of_a_planted_checkpoint_is_one_line_and_exit_1(
    copy: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "code-ran"
    plant(copy / STEP8, "model.tok_embeddings.weight", RunsCommand(marker))
    pretrain = Path(sys.executable).with_name("pretrain")
    done = subprocess.run(
        [str(pretrain), "export", "b00-s000000008", str(tmp_path / "out")],
        env={**os.environ, "PRETRAIN_ROOT": str(copy.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"pretrain export: error: {copy / STEP8}/__0_0.distcp")
    assert "use another checkpoint" in done.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_planted_checkpoint_fails_a_torchrun_resume_on_every_rank(
    trained: tuple[Path, Path], copy: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "code-ran"
    plant(copy / STEP8, LR, RunsCommand(marker))
    config = tmp_path / "run.json"
    config.write_text(make_config(trained[0], copy, max_steps=12).to_json())
    done = run_torchrun(config)
    assert done.returncode != 0
    assert "CheckpointError" in done.stderr and f"entry '{LR}' holds more than" in done.stderr
    assert not marker.exists()
    failed = [e for e in read_jsonl(copy / "b00" / "events.jsonl") if e["event"] == "failed"]
    assert len(failed) == 1 and "__0_0.distcp: entry" in failed[0]["error"]
    assert ckpt.latest_checkpoint(copy, "b00") == copy / STEP8
