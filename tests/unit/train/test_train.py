"""Trainer tests: config, data reader, LR schedule, checkpoints, exact resume, torchrun + FSDP2.

Single-process runs call ``train()`` / ``main()`` in-process (fast); the distributed test
launches ``torchrun --standalone --nproc_per_node=2`` (gloo) twice.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from pretrain.checkpoint import dcp as ckpt
from pretrain.distributed import ProcessInfo
from pretrain.errors import CheckpointError, ConfigError, DataError
from pretrain.packing.format import PackedSplit, read_packed_index
from pretrain.packing.order import BatchReader
from pretrain.train.__main__ import main
from pretrain.train.config import (
    DataConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from pretrain.train.events import ProgressThrottle
from pretrain.train.optim import build_optimizer, lr_at
from pretrain.train.parallel import build_model
from pretrain.train.recipes import recipe_with_overrides
from tests.helpers.training import (
    REPO,
    SEQ_LEN,
    TRAINER_ENV,
    VOCAB,
    losses,
    make_config,
    make_packed,
    read_jsonl,
    run,
    save_model,
    torchrun,
)


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_packed(tmp_path_factory.mktemp("packed") / "packed_tokens")


# -- config ---------------------------------------------------------------------------------
def test_config_json_round_trip(packed: Path, tmp_path: Path) -> None:
    cfg = make_config(packed, tmp_path, skip_windows=((3, 5),), lr_scale=0.8, branch="b02")
    again = TrainConfig.from_json(cfg.to_json())
    assert again == cfg
    assert again.run.skip_windows == ((3, 5),) and again.optim.betas == (0.9, 0.95)


def test_config_errors_explain_the_fix(packed: Path, tmp_path: Path) -> None:
    cfg = make_config(packed, tmp_path)
    with pytest.raises(ConfigError, match="use 12 or 24"):
        DataConfig(packed_dir="x", micro_batch_size=4, global_batch_sequences=20).accum_steps(3)
    with pytest.raises(ConfigError, match="unknown keys"):
        TrainConfig.from_dict({**cfg.to_dict(), "lr": 1})
    with pytest.raises(ConfigError, match="simple name"):
        RunConfig(max_steps=1, branch="a/b")
    with pytest.raises(ConfigError, match="schedule_steps"):
        make_config(packed, tmp_path, max_steps=20, schedule_steps=12)
    assert cfg.data.accum_steps(world_size=2) == 1 and cfg.data.accum_steps(world_size=1) == 2


def test_overrides_apply_to_the_recipe(packed: Path, tmp_path: Path) -> None:
    overrides = {
        "run": {"max_steps": 30, "branch": "b01", "resume": "none", "lr_scale": 0.8,
                "skip_windows": [[5, 9]]},
        "checkpoint": {"every_steps": 10},
        "data": {"micro_batch_size": 2, "global_batch_sequences": 8, "seed": 3},
        "optim": {"lr": 1e-3},
        "seed": 3,
    }  # fmt: skip
    cfg = recipe_with_overrides(
        "debug_tiny", packed_dir=str(packed), run_root=str(tmp_path), overrides=overrides
    )
    assert cfg.model.vocab_size == VOCAB and cfg.model.max_seq_len == SEQ_LEN
    assert (cfg.optim.lr, cfg.optim.schedule_steps, cfg.optim.warmup_steps) == (1e-3, 30, 10)
    assert cfg.run == RunConfig(
        branch="b01", max_steps=30, resume="none", lr_scale=0.8, skip_windows=((5, 9),)
    )
    assert (cfg.data.micro_batch_size, cfg.data.seed, cfg.seed) == (2, 3, 3)
    assert cfg.checkpoint.every_steps == 10 and cfg.data.accum_steps(world_size=2) == 2


def test_lr_schedule_warmup_then_cosine_to_floor(packed: Path, tmp_path: Path) -> None:
    optim = OptimConfig(lr=1.0, warmup_steps=4, schedule_steps=14, min_lr_ratio=0.1)
    assert [lr_at(s, optim) for s in (1, 2, 4)] == [0.25, 0.5, 1.0]
    assert lr_at(9, optim) == pytest.approx(0.55)  # halfway down the cosine
    assert lr_at(14, optim) == pytest.approx(0.1) and lr_at(100, optim) == pytest.approx(0.1)
    assert lr_at(2, optim, lr_scale=0.8) == pytest.approx(0.4)


def test_progress_throttle_needs_steps_and_seconds() -> None:
    now = [0.0]
    throttle = ProgressThrottle(every_steps=5, min_interval_s=10, clock=lambda: now[0])
    assert throttle.ready(1)
    now[0] = 100
    assert not throttle.ready(3)  # enough time, too few steps
    now[0] = 105
    assert throttle.ready(6) and not throttle.ready(20)  # second call: no time has passed


# -- data -----------------------------------------------------------------------------------
def test_reader_is_deterministic_sharded_and_resumable(packed: Path) -> None:
    split = PackedSplit(read_packed_index(str(packed)), "train")
    full = BatchReader(split, global_batch=16, seed=7, rank=0, world_size=1)
    ranks = [BatchReader(split, global_batch=16, seed=7, rank=r, world_size=2) for r in (0, 1)]
    for _ in range(5):  # 64 sequences / 16 = 4 steps per epoch: crosses into epoch 1
        whole = full.next_batch()
        halves = np.concatenate([r.next_batch() for r in ranks])
        assert sorted(map(tuple, whole)) == sorted(map(tuple, halves))
    assert full.state_dict() == {"epoch": 1, "position": 16, "seed": 7}
    resumed = BatchReader(split, global_batch=16, seed=7, rank=0, world_size=1)
    resumed.load_state_dict(full.state_dict())
    assert np.array_equal(resumed.next_batch(), full.next_batch())
    assert not np.array_equal(full.next_batch()[:, 1:], full.next_batch()[:, 1:])


def test_reader_refuses_uncommitted_or_inconsistent_data(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="_COMMITTED"):
        read_packed_index(str(make_packed(tmp_path / "partial", committed=False)))
    broken = make_packed(tmp_path / "short")
    (broken / "train-00000.bin").write_bytes(b"\0" * 10)
    with pytest.raises(DataError, match="repack"):
        PackedSplit(read_packed_index(str(broken)), "train")


# -- checkpoints ----------------------------------------------------------------------------
def test_latest_checkpoint_ignores_tmp_and_uncommitted_dirs(tmp_path: Path) -> None:
    branch = tmp_path / "b00"
    for name, committed in [
        ("step-00000004", True),
        ("step-00000008", True),
        ("step-00000012", False),
        (".tmp-step-00000016", True),
    ]:
        (branch / name).mkdir(parents=True)
        if committed:
            (branch / name / "_COMMITTED").write_text("{}")
    assert ckpt.latest_checkpoint(tmp_path, "b00") == branch / "step-00000008"
    assert ckpt.latest_checkpoint(tmp_path, "b01") is None
    assert ckpt.checkpoint_key("b02", 120000) == "b02-s000120000"
    key = ckpt.checkpoint_key("rb-1", 40)
    assert ckpt.checkpoint_dir_for_key(tmp_path, key) == tmp_path / "rb-1" / "step-00000040"
    removed = ckpt.prune_checkpoints(tmp_path, "b00", keep_last=1, protected=())
    assert removed == [branch / "step-00000004"] and not (branch / "step-00000004").exists()


def test_checkpoint_reloads_to_identical_weights(packed: Path, tmp_path: Path) -> None:
    cfg = make_config(packed, tmp_path)
    proc = ProcessInfo()
    model = build_model(cfg.model, proc, seed=0)
    assert model.output.weight is model.tok_embeddings.weight
    optimizer = build_optimizer(model, cfg.optim)
    model(torch.randint(0, VOCAB, (2, 8))).logsumexp(-1).mean().backward()
    optimizer.step()
    meta = {"tokens_seen": 0, "data_state": {}}
    path = save_model(cfg, model, step=3, meta=meta, optimizer=optimizer, proc=proc)
    assert path == tmp_path / "b00" / "step-00000003" and (path / "_COMMITTED").exists()
    assert not list((tmp_path / "b00").glob(".tmp-*"))
    reloaded = ckpt.load_consolidated_model(str(path))
    original = model.state_dict()
    assert reloaded.state_dict().keys() == original.keys()
    assert all(torch.equal(v, original[k]) for k, v in reloaded.state_dict().items())
    with pytest.raises(CheckpointError, match="already exists"):
        save_model(cfg, model, step=3, meta={}, optimizer=optimizer, proc=proc)


# -- the loop -------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_single_process_learns_and_reports(packed: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = main(
        [
            "--recipe",
            "debug_tiny",
            "--packed",
            str(packed),
            "--out",
            str(out),
            "--max-steps",
            "40",
            "--wandb-mode",
            "disabled",
        ]
    )
    assert rc == 0
    curve = losses(out)
    assert sorted(curve) == list(range(1, 41))
    assert curve[1] == pytest.approx(math.log(VOCAB), rel=0.1)  # ~uniform at init
    assert curve[40] < 0.5 * curve[1]
    events = read_jsonl(out / "b00" / "events.jsonl")
    assert [e["event"] for e in events if e["event"] != "progress"] == [
        "started",
        "checkpoint",
        "checkpoint",
        "checkpoint",
        "checkpoint",
        "finished",
    ]
    assert events[-1]["final_loss"] == curve[40] and events[-1]["tokens_seen"] == 40 * 16 * 32
    assert [p.name for p in ckpt.list_checkpoints(out, "b00")] == [
        "step-00000020",
        "step-00000030",
        "step-00000040",
    ]  # keep_last=3
    meta = ckpt.read_meta(ckpt.latest_checkpoint(out, "b00"))
    assert (
        meta["lineage"]["tokenizer_sha256"] == "ab" * 32
        and meta["loss_window"]["last"] == curve[40]
    )


@pytest.mark.slow
def test_exact_resume_from_latest_is_bitwise_identical(packed: Path, tmp_path: Path) -> None:
    run(make_config(packed, tmp_path / "straight"))
    first = run(make_config(packed, tmp_path / "split", max_steps=8))
    assert first.last_checkpoint == tmp_path / "split" / "b00" / "step-00000008"
    second = run(make_config(packed, tmp_path / "split"))  # resume="latest" by default
    assert second.step == 12
    straight, split = losses(tmp_path / "straight"), losses(tmp_path / "split")
    assert [split[s] for s in range(9, 13)] == [straight[s] for s in range(9, 13)]
    with pytest.raises(CheckpointError, match="new branch"):  # rewinding a branch is refused
        run(make_config(packed, tmp_path / "split", resume=str(first.last_checkpoint)))


@pytest.mark.slow
def test_skip_window_consumes_data_without_training(packed: Path, tmp_path: Path) -> None:
    cfg = make_config(packed, tmp_path, max_steps=6, every=6, skip_windows=((3, 5),))
    events: list[dict] = []
    sink = type(
        "ListSink", (), {"emit": lambda self, e: events.append(e), "close": lambda self: None}
    )()
    result = run(cfg, events=sink)
    rows = read_jsonl(tmp_path / "b00" / "metrics.jsonl")
    assert [r["step"] for r in rows if r.get("skipped")] == [3, 4]
    assert sorted(losses(tmp_path)) == [1, 2, 5, 6]
    assert result.tokens_seen == 4 * 8 * 32
    skipped = [e for e in events if e["event"] == "skipped"]
    assert skipped == [{"event": "skipped", "start_step": 3, "end_step": 5, "num_sequences": 16}]
    meta = ckpt.read_meta(result.last_checkpoint)
    assert meta["skipped_steps"] == [3, 4] and meta["data_state"]["position"] == 6 * 8


@pytest.mark.slow
def test_sigterm_finishes_the_step_checkpoints_and_exits_0(packed: Path, tmp_path: Path) -> None:
    cfg = make_config(packed, tmp_path, max_steps=5000, schedule_steps=5000, every=25, keep_last=2)
    (tmp_path / "run.json").write_text(cfg.to_json())
    proc = subprocess.Popen(
        [sys.executable, "-m", "pretrain.train", "--config", str(tmp_path / "run.json")],
        cwd=REPO,
        env={**os.environ, **TRAINER_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    metrics = tmp_path / "b00" / "metrics.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        ckpt.list_checkpoints(tmp_path, "b00") and metrics.exists()
    ):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr.decode()[-2000:]  # graceful stop = success
    events = read_jsonl(tmp_path / "b00" / "events.jsonl")
    stopped = events[-1]
    assert stopped["event"] == "stopped" and stopped["signal"] == "SIGTERM"
    assert 0 < stopped["step"] < 5000
    # the step it stopped at is checkpointed (not only the last every-25 one), then announced
    last = ckpt.latest_checkpoint(tmp_path, "b00")
    assert last == tmp_path / "b00" / ckpt.step_dir_name(stopped["step"])
    assert stopped["checkpoint"] == str(last)
    assert events[-2]["event"] == "checkpoint" and events[-2]["step"] == stopped["step"]
    assert ckpt.read_meta(last)["data_state"]["position"] % 8 == 0
    assert max(losses(tmp_path)) == stopped["step"]  # no step trained past the checkpoint
    leftovers = [p.name for p in (tmp_path / "b00").iterdir() if p.name.startswith(".")]
    assert leftovers == []
    assert f"stopped by SIGTERM after step {stopped['step']}" in stdout.decode()


def test_importing_the_packages_does_not_import_torch() -> None:
    code = (
        "import sys, pretrain.model, pretrain.train, pretrain.eval, pretrain.checkpoint.dcp; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


@pytest.mark.slow
def test_torchrun_fsdp2_checkpoints_metrics_wandb_and_exact_resume(
    packed: Path, tmp_path: Path
) -> None:
    cfg = make_config(packed, tmp_path, keep_last=2)
    cfg = cfg.replace(
        metrics=dataclasses.replace(cfg.metrics, wandb_mode="offline", progress_every_steps=5)
    )
    (tmp_path / "run.json").write_text(cfg.to_json())
    torchrun(tmp_path / "run.json")

    branch = tmp_path / "b00"
    assert [p.name for p in ckpt.list_checkpoints(tmp_path, "b00")] == [
        "step-00000008",
        "step-00000012",
    ]
    assert sorted(p.name for p in (branch / "step-00000012").glob("*.distcp")) == [
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    assert (branch / "step-00000012" / "rng-rank00001.pt").exists()
    curve = losses(tmp_path)
    assert sorted(curve) == list(range(1, 13)) and curve[12] < curve[1]
    events = read_jsonl(branch / "events.jsonl")
    assert events[0] | {"time": 0} == {
        "event": "started",
        "branch": "b00",
        "start_step": 0,
        "max_steps": 12,
        "world_size": 2,
        "num_params": 746_624,
        "resumed_from": None,
        "time": 0,
    }
    assert [e["step"] for e in events if e["event"] == "progress"] == [1, 6, 11]
    checkpoints = [e for e in events if e["event"] == "checkpoint"]
    assert [(e["step"], e["key"]) for e in checkpoints] == [
        (4, "b00-s000000004"),
        (8, "b00-s000000008"),
        (12, "b00-s000000012"),
    ]
    assert checkpoints[-1]["loss"] == curve[12] and checkpoints[-1]["tokens_seen"] == 12 * 8 * 32
    assert events[-1]["event"] == "finished"
    wandb_files = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(wandb_files) == 1 and wandb_files[0].stat().st_size > 0

    # resume a new branch from b00's step 8: steps 9-12 must match bit for bit
    torchrun(
        tmp_path / "run.json",
        "--branch",
        "b01",
        "--resume",
        str(branch / "step-00000008"),
        "--wandb-mode",
        "disabled",
    )
    resumed = losses(tmp_path, "b01")
    assert resumed == {s: curve[s] for s in range(9, 13)}
    meta = ckpt.read_meta(tmp_path / "b01" / "step-00000012")
    assert meta["lineage"]["parent"] == str(branch / "step-00000008") and meta["world_size"] == 2
    a = ckpt.load_consolidated_model(str(branch / "step-00000012")).state_dict()
    b = ckpt.load_consolidated_model(str(tmp_path / "b01" / "step-00000012")).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
