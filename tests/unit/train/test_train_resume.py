"""Exact resume after ``kill -9`` under torchrun (gloo, world size 2), plus the export of the result.

A reference run trains steps 1..N uninterrupted. A second run of the same config is killed
with SIGKILL — torchrun and both workers, no chance to clean up — at a random step after its
first checkpoint, then relaunched with ``--resume latest``. Every step after the checkpoint it
resumed from must have the reference's loss bit for bit, the data cursor must end where the
reference's does (no sample repeated or skipped), and the final weights must be identical.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest
import torch

from pretrain.checkpoint import dcp as ckpt
from pretrain.train.export import export_checkpoint, load_export
from resources.process_tree import descendants
from tests.helpers.training import (
    REPO,
    TRAINER_ENV,
    kill_tree,
    make_config,
    make_packed,
    read_jsonl,
    torchrun,
    torchrun_cmd,
)

FINAL_STEP = 30


def metric_rows(run_root: Path, branch: str) -> list[dict]:
    path = run_root / branch / "metrics.jsonl"
    return read_jsonl(path) if path.exists() else []


def kill_tree_at_step(config: Path, run_root: Path, branch: str, kill_step: int) -> int:
    """Start the run; SIGKILL torchrun and every worker once ``kill_step`` is logged."""
    proc = subprocess.Popen(
        torchrun_cmd(config, "--branch", branch),  # max_steps 1000: killed long before
        cwd=REPO,
        env={**os.environ, **TRAINER_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not any(r["step"] >= kill_step for r in metric_rows(run_root, branch)):
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, f"step {kill_step} not reached within 120 s"
        time.sleep(0.01)
    kill_tree(proc, {proc.pid} | descendants(proc.pid))
    return max(r["step"] for r in metric_rows(run_root, branch))


@pytest.mark.slow
def test_kill_9_at_a_random_step_then_resume_latest_is_bitwise_exact(tmp_path: Path) -> None:
    packed = make_packed(tmp_path / "packed", num_train=64)  # 8 steps per epoch: crosses epochs
    run_root = tmp_path / "runs"
    # the LR horizon stays 1000 steps for every launch: --max-steps only moves the stop point
    cfg = make_config(packed, run_root, max_steps=1000, schedule_steps=1000, every=5, keep_last=3)
    config = tmp_path / "run.json"
    config.write_text(cfg.to_json())

    torchrun(config, "--branch", "ref", "--max-steps", str(FINAL_STEP))
    reference = {r["step"]: r["loss"] for r in metric_rows(run_root, "ref")}
    assert sorted(reference) == list(range(1, FINAL_STEP + 1))

    kill_step = random.Random().randint(6, 18)  # after the first checkpoint (step 5)
    died_after = kill_tree_at_step(config, run_root, "b00", kill_step)
    resumed_from = ckpt.latest_checkpoint(run_root, "b00")
    assert resumed_from is not None
    start = ckpt.step_of(resumed_from)
    assert 5 <= start <= died_after < FINAL_STEP, (kill_step, died_after, start)
    before = len(metric_rows(run_root, "b00"))

    torchrun(config, "--branch", "b00", "--resume", "latest", "--max-steps", str(FINAL_STEP))
    after = metric_rows(run_root, "b00")[before:]
    assert [r["step"] for r in after] == list(range(start + 1, FINAL_STEP + 1))  # none missing
    assert {r["step"]: r["loss"] for r in after} == {
        s: reference[s] for s in range(start + 1, FINAL_STEP + 1)
    }, f"killed after step {died_after}, resumed from {start}"
    # the killed run's own rows past its checkpoint were right too (determinism, not luck)
    killed_rows = metric_rows(run_root, "b00")[:before]
    assert all(r["loss"] == reference[r["step"]] for r in killed_rows)

    ref_meta = ckpt.read_meta(run_root / "ref" / ckpt.step_dir_name(FINAL_STEP))
    meta = ckpt.read_meta(run_root / "b00" / ckpt.step_dir_name(FINAL_STEP))
    assert meta["data_state"] == ref_meta["data_state"]  # same cursor: nothing repeated/skipped
    assert meta["tokens_seen"] == ref_meta["tokens_seen"] == FINAL_STEP * 8 * 32
    assert meta["weights_fingerprint"] == ref_meta["weights_fingerprint"]
    assert meta["lineage"]["parent"] == str(resumed_from)
    events = read_jsonl(run_root / "b00" / "events.jsonl")
    assert events[-1]["event"] == "finished" and events[-1]["step"] == FINAL_STEP

    # the consolidated export of a 2-rank checkpoint is the same model in one file
    final = run_root / "b00" / ckpt.step_dir_name(FINAL_STEP)
    weights = export_checkpoint(final, tmp_path / "export")
    exported = load_export(tmp_path / "export")  # verifies the fingerprint itself
    consolidated = ckpt.load_consolidated_model(str(final))
    tokens = torch.randint(0, 64, (2, 32))
    assert torch.equal(exported(tokens), consolidated(tokens))
    info = json.loads((tmp_path / "export" / "export.json").read_text())
    assert info["key"] == "b00-s000000030" and weights.suffix in (".safetensors", ".pt")
