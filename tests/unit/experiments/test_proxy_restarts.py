"""A proxy never gets stuck and never counts when it is stale (issue 38, §3).

- **Stuck**: a proxy killed after its last checkpoint committed but before ``result.json`` is
  run again, and trains again from the start (it failed on ``branch 'proxy' already has
  step-…`` before, every time, until ``run/`` was deleted by hand).
- **Stale**: a run redone in place first removes the old ``result.json``; a result counts
  (``registry.results``, so ``not_run``, the sensor and ``experiments list``) only while its
  output's identity is there and every input it records is unchanged.

A two-step proxy recipe on the synthetic corpus keeps the one training to about a second; the
state a kill leaves is planted (a committed checkpoint marker, an old ``result.json``)::

    .venv/bin/pytest -q tests/unit/experiments/test_proxy_restarts.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.cli import main as cli_main
from pretrain import identity, storage
from pretrain.experiments import registry
from pretrain.experiments.config import PROXY_RECIPES, DataVariant, ExperimentSpec
from pretrain.experiments.run import RESULT_FILE, ExperimentResult, run_experiment
from pretrain.train.config import TrainConfig
from tests.helpers.experiments import synthetic_setup

MICRO = dataclasses.replace(
    PROXY_RECIPES["proxy_tiny"], name="proxy_micro", token_budget=2 * 16 * 64,
    max_val_sequences=4, max_task_examples=1,
)  # fmt: skip


class Killed(Exception):
    """What the test raises where a SIGKILL would have stopped the proxy."""


@pytest.fixture
def proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(PROXY_RECIPES, MICRO.name, MICRO)
    basis, pools = synthetic_setup(tmp_path)
    spec = ExperimentSpec(name="mix-micro-s0", variant=DataVariant(), recipe=MICRO.name)
    out = tmp_path / "proxy_runs" / spec.name

    def run(**kwargs) -> ExperimentResult:
        return run_experiment(
            spec, [p for g in ("alpha-0000", "beta-0000") for p in pools[g]],
            val_packed_dir=f"{basis}/validation", tokenizer_uri=f"{basis}/tokenizer",
            out_dir=str(out), **kwargs,
        )  # fmt: skip

    return run, out


def _left_by_a_kill(out: Path, result: bool) -> Path:
    """What a proxy SIGKILLed after its last commit leaves: the committed checkpoint (and, when
    it was a rerun in place, the previous run's ``result.json``)."""
    step = out / "run" / "proxy" / "step-00000002"
    storage.commit_marker(str(step), {"step": 2})
    if result:
        storage.write_json({"name": "old"}, str(out / RESULT_FILE))
    return step


def test_a_proxy_killed_after_its_checkpoint_trains_again(proxy) -> None:
    run, out = proxy
    _left_by_a_kill(out, result=False)
    again = run()  # not "CheckpointError: branch 'proxy' already has step-00000002"
    assert again.cost["steps"] == 2 and again.checkpoint.endswith("run/proxy/step-00000002")
    assert (out / RESULT_FILE).exists() and storage.is_committed(again.checkpoint)
    assert (Path(again.checkpoint) / "meta.json").exists()  # a real checkpoint, not the leftover


def test_a_rerun_removes_the_old_result_before_it_trains(proxy) -> None:
    run, out = proxy
    _left_by_a_kill(out, result=True)

    def killed(cfg: TrainConfig, config_path: str) -> None:
        assert not (out / RESULT_FILE).exists() and not (out / "run").exists()
        raise Killed

    with pytest.raises(Killed):
        run(train_fn=killed)
    assert not (out / RESULT_FILE).exists()  # an old number never outlives its rerun


def _result(root: Path, name: str, inputs: dict[str, str]) -> ExperimentResult:
    spec = ExperimentSpec(name=name, variant=DataVariant())
    registry.register(str(root), spec)
    result = ExperimentResult(
        name=name, spec=spec.to_dict(), shares={}, rows={}, loss={"web": 2.0},
        bits_per_byte={"web": 1.5}, tasks={}, cost={"flops": 1e9, "wall_s": 1.0},
    )  # fmt: skip
    out = registry.result_dir(str(root), name)
    storage.write_json(result.to_dict(), storage.join(out, RESULT_FILE))
    ident = identity.Identity(stage="proxy_runs", code_version="t", config_hash="h",
                              inputs=inputs, version=f"v-{name}")  # fmt: skip
    identity.write(out, ident)
    return result


def test_a_result_counts_only_while_its_identity_is_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = str(tmp_path / "proxy_pools" / "web-0000")
    made = identity.Identity(stage="proxy_pools", code_version="t", config_hash="h", version="p1")
    identity.write(pool, made)
    _result(tmp_path, "mix-a-s0", {pool: "p1"})
    _result(tmp_path, "mix-b-s0", {pool: "p1"})
    assert registry.results(str(tmp_path), ["mix-a-s0", "mix-b-s0"]).keys() == {
        "mix-a-s0", "mix-b-s0"
    }  # fmt: skip
    # a rerun in progress (begin_output dropped the identity) or killed before it finished
    storage.remove(storage.join(registry.result_dir(str(tmp_path), "mix-b-s0"), "_identity.json"))
    assert registry.results(str(tmp_path), ["mix-a-s0", "mix-b-s0"]).keys() == {"mix-a-s0"}
    assert cli_main(["experiments", "--root", str(tmp_path), "list"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "1.5000" in rows["mix-a-s0"] and "not run" in rows["mix-b-s0"]
    assert cli_main(["experiments", "--root", str(tmp_path), "show", "mix-b-s0"]) == 0
    assert "its result does not count" in capsys.readouterr().out
    # its inputs changed since: the old number must not be read as this experiment's
    identity.write(pool, dataclasses.replace(made, version="p2"))
    assert registry.results(str(tmp_path), ["mix-a-s0", "mix-b-s0"]) == {}
