"""Launcher overhead: launch → first training step, and cancel → last process gone,
local ``torchrun`` vs a Slurm job (``sbatch`` → ``srun torchrun``) on a one-node Slurm cluster.

Both run the same 2-process gloo trainer on tiny packed tokens (the tests' ``make_packed``);
``first_step`` is when step 1's row appears in ``metrics.jsonl``, measured from just before
``Popen``/``sbatch``. ``cancel`` is the launcher's own stop path: SIGTERM → wait → SIGKILL over the
process tree for torchrun, ``SlurmLauncher.terminate`` (``scancel --signal=TERM --full``, then
``scancel``) for Slurm, until no process naming the run's config is left and the job has left
``squeue``. Targets (issue 15): Slurm adds ≤ 10 s to the start; cancel leaves nothing within 30 s.
Needs root and Debian's slurm-wlm + munge (``.ci/run`` installs them). Ends with ONE JSON line.

    .venv/bin/python bench/launcher_overhead.py --trials 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from resources.launcher import TorchrunLauncher  # noqa: E402
from tests.servers.slurm_cluster import slurm_cluster, slurm_unavailable  # noqa: E402
from tests.servers.training_jobs import SlurmJob, TorchrunJob, processes_naming  # noqa: E402
from tests.unit.train.test_train import make_config, make_packed  # noqa: E402


def first_step_seen(metrics: Path) -> bool:
    try:
        return any('"step": 1' in line for line in metrics.read_text().splitlines())
    except FileNotFoundError:
        return False


def trial(kind: str, work: Path, packed: Path, slurm: Any) -> dict[str, float]:
    run_root = work / "runs"
    cfg = make_config(packed, run_root, max_steps=100_000, schedule_steps=100_000, every=10_000)
    config_path = work / f"run-{kind}.json"
    config_path.write_text(cfg.to_json())
    (run_root / "b00").mkdir(parents=True)
    started = time.monotonic()
    if kind == "torchrun":
        job: Any = TorchrunJob(TorchrunLauncher(nproc_per_node=2), config_path, work / "log")
    else:
        job = SlurmJob(slurm.launcher(), config_path, run_root / "b00")
    metrics = run_root / "b00" / "metrics.jsonl"
    while not first_step_seen(metrics):
        if job.poll() is not None:
            raise RuntimeError(f"{kind} trainer exited early ({job.returncode})")
        if time.monotonic() - started > 300:
            raise TimeoutError(f"{kind}: no first step in 300 s")
        time.sleep(0.05)
    first_step_s = time.monotonic() - started
    time.sleep(2.0)  # let it train a little before the cancel
    stop_at = time.monotonic()
    job.stop()
    while processes_naming(config_path.name):
        time.sleep(0.05)
    cancel_s = time.monotonic() - stop_at
    leftover = len(processes_naming(config_path.name))
    in_queue = len(slurm.queue()) if slurm is not None else 0
    return {"first_step_s": first_step_s, "cancel_s": cancel_s, "leftover": leftover + in_queue}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    reason = slurm_unavailable()
    if reason:
        print(json.dumps({"bench": "launcher_overhead", "skipped": reason}))
        return 1
    results: dict[str, list[dict[str, float]]] = {"torchrun": [], "slurm": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        packed = make_packed(base / "packed_tokens", num_train=64)
        with slurm_cluster(base / "slurm") as cluster:
            os.environ["SLURM_CONF"] = str(cluster.conf)  # for sbatch/squeue/scancel
            for n in range(args.trials):  # interleaved, so machine load hits both alike
                for kind in ("torchrun", "slurm"):
                    work = base / f"{kind}-{n}"
                    work.mkdir()
                    row = trial(kind, work, packed, cluster if kind == "slurm" else None)
                    results[kind].append(row)
                    print(f"{kind:8s} trial {n}: first step {row['first_step_s']:5.2f} s, "
                          f"cancel {row['cancel_s']:5.2f} s, left {row['leftover']}", flush=True)  # fmt: skip

    def median(kind: str, key: str) -> float:
        return round(statistics.median(r[key] for r in results[kind]), 2)

    added = round(median("slurm", "first_step_s") - median("torchrun", "first_step_s"), 2)
    worst_cancel = max(r["cancel_s"] for rows in results.values() for r in rows)
    leftover = sum(r["leftover"] for rows in results.values() for r in rows)
    print(f"\n{'':10s}{'first step (median)':>22s}{'cancel (median)':>18s}")
    for kind in results:
        print(
            f"{kind:10s}{median(kind, 'first_step_s'):>20.2f} s{median(kind, 'cancel_s'):>16.2f} s"
        )
    print(f"Slurm adds {added:+.2f} s to the start (target ≤ 10 s); worst cancel "
          f"{worst_cancel:.2f} s (target ≤ 30 s); processes/jobs left: {leftover}")  # fmt: skip
    line = {
        "bench": "launcher_overhead",
        "trials": args.trials,
        "load_avg_1m": round(os.getloadavg()[0], 1),
        "torchrun_first_step_s": median("torchrun", "first_step_s"),
        "slurm_first_step_s": median("slurm", "first_step_s"),
        "slurm_added_start_s": added,
        "torchrun_cancel_s": median("torchrun", "cancel_s"),
        "slurm_cancel_s": median("slurm", "cancel_s"),
        "worst_cancel_s": round(worst_cancel, 2),
        "left_behind": leftover,
        "start_target_met": added <= 10.0,
        "cancel_target_met": worst_cancel <= 30.0 and leftover == 0,
    }
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
