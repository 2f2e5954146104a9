"""Overhead per proxy beyond its training steps (part 3 of ``bench/data_roi.py``).

- **in process** (the library): ``run_experiment``'s wall time minus the steps' own time (the
  sum of ``step_time_s`` in the proxy's ``metrics.jsonl``), over every proxy the bench trained,
  split into the view and config before training, the trainer's start and stop (model build,
  data open, the final checkpoint) and the evaluation;
- **through Dagster**: the same kind of proxy as a ``proxy_runs`` partition, materialized by the
  ``run_proxies`` job with ``execute_in_process`` -- the trainer in the step's process
  (``in_process: true``) and through the asset's default ``proxy_launcher`` (``torchrun``, one
  process) -- and, with ``--ray``, on a Ray cluster through dagster-ray's executor
  (``app/ray_definitions.py``'s ``proxy_runs_on_ray``: the step a Ray job, on a head and a
  worker node from ``tests/servers/ray_cluster.py``). Overhead = the run's wall time minus its
  steps.

The Dagster side starts from the admitted groups' documents adopted as ``deduped_shards``
(``identity.adopt``), then ``make_basis`` and ``make_pools`` through Dagster, as a campaign
would have them.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

DAGSTER_PROXIES = 3  # proxies per Dagster path (search candidates of the admitted corpus)


def _summary(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "median": statistics.median(values),
            "min": min(values), "max": max(values), "n": len(values)}  # fmt: skip


def in_process_overhead(runs: list[dict], *, large: str) -> dict:
    """Overhead of the in-process path over the proxies (every recipe but ``large``, the check
    runs) of the work folder: starts, anneals and proxies trained from scratch alike."""
    proxies = [r for r in runs if r["result"].spec["recipe"] != large]
    if not proxies:
        return {"proxies": 0, "note": "no proxy trained in this invocation (all reused)"}
    rows = []
    for r in proxies:
        cost = r["result"].cost
        rows.append({
            "wall_s": cost["wall_s"], "steps_s": r["steps_s"], "cpu_s": r["cpu_s"],
            "overhead_s": cost["wall_s"] - r["steps_s"],
            "before_after_s": cost["wall_s"] - cost["train_s"] - cost["eval_s"],
            "trainer_start_stop_s": cost["train_s"] - r["steps_s"], "eval_s": cost["eval_s"],
        })  # fmt: skip
    out = {k: _summary([row[k] for row in rows]) for k in rows[0]}
    out["overhead_share"] = statistics.fmean(row["overhead_s"] / row["wall_s"] for row in rows)
    out["proxies"] = len(rows)
    out["load"] = _summary([r["load_before"] for r in proxies])
    print(f"\noverhead in process ({len(rows)} proxies, load {out['load']['mean']:.1f}): "
          f"wall {out['wall_s']['mean']:.1f}s = steps {out['steps_s']['mean']:.1f}s + "
          f"{out['overhead_s']['mean']:.1f}s (view/config/result "
          f"{out['before_after_s']['mean']:.2f}s, trainer start/stop "
          f"{out['trainer_start_stop_s']['mean']:.1f}s, eval {out['eval_s']['mean']:.1f}s); "
          f"{out['overhead_share']:.0%} of the wall time", flush=True)  # fmt: skip
    return out


def _steps_of(root: Path, name: str) -> float:
    from pretrain.experiments import registry

    metrics = Path(registry.result_dir(str(root), name)) / "run" / "proxy" / "metrics.jsonl"
    return sum(float(json.loads(line).get("step_time_s") or 0.0)
               for line in metrics.read_text().splitlines())  # fmt: skip


def _prepare(setup, tmp: Path, proxy: str, basis: dict) -> tuple:
    """An artifact root and instance with the admitted groups as deduped_shards, the basis and
    the pools made through Dagster, and ``3 × DAGSTER_PROXIES`` proxy experiments registered."""
    from dagster import DagsterInstance

    from app.definitions import build_definitions
    from foundation.stages import run_configs
    from pretrain import identity
    from pretrain.experiments import registry
    from pretrain.experiments.search import SearchSpace, sample_mixtures

    root, home = tmp / "artifacts", tmp / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ.update({"DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(root)})
    groups = setup.base_groups
    for group in groups:
        target = root / "deduped_shards" / group
        target.mkdir(parents=True)
        source = setup.work / "corpus" / group / "documents.parquet"
        shutil.copy(source, target / "documents.parquet")
        identity.adopt(str(target), "deduped_shards")
    defs = build_definitions(artifact_root=str(root), nproc_per_node=1)
    instance = DagsterInstance.get()
    instance.add_dynamic_partitions("shards", groups)
    config = run_configs({"basis": basis})["experiment_basis_job"]
    assert defs.resolve_job_def("experiment_basis_job").execute_in_process(
        instance=instance, run_config=config).success  # fmt: skip
    for group in groups:
        assert defs.resolve_job_def("proxy_pools_job").execute_in_process(
            instance=instance, partition_key=group).success  # fmt: skip
    space = SearchSpace.from_pools(setup.pools_of(groups))
    mixtures = sample_mixtures(space, count=3 * DAGSTER_PROXIES, seed=99)
    specs = registry.search_specs("overhead", mixtures, recipe=proxy, seeds=(0,))
    for spec in specs:
        registry.register(str(root), spec)
    instance.add_dynamic_partitions("experiments", [s.name for s in specs])
    return root, defs, instance, [s.name for s in specs]


def _measure(runner, names: list[str], root: Path) -> dict:
    rows = []
    for name in names:
        started = time.perf_counter()
        runner(name)
        wall = time.perf_counter() - started
        steps = _steps_of(root, name)
        rows.append({"wall_s": wall, "steps_s": steps, "overhead_s": wall - steps})
    return {k: _summary([row[k] for row in rows]) for k in rows[0]}


def dagster_overhead(setup, *, proxy: str, ray: bool, basis: dict) -> dict:
    """``proxy_runs`` through Dagster: in process, with the torchrun launcher, on Ray."""
    from foundation.stages import run_configs

    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="roi-dagster-") as tmp_name:
        tmp = Path(tmp_name)
        root, defs, instance, names = _prepare(setup, tmp, proxy, basis)
        job = defs.resolve_job_def("proxy_runs_job")
        task_free = {"task_dir": ""}  # as the library path: validation bits per byte only

        def in_process(name: str) -> None:
            config = run_configs({"proxy": {**task_free, "in_process": True}})["proxy_runs_job"]
            assert job.execute_in_process(instance=instance, partition_key=name,
                                          run_config=config).success  # fmt: skip

        def launcher(name: str) -> None:
            config = run_configs({"proxy": task_free})["proxy_runs_job"]
            assert job.execute_in_process(instance=instance, partition_key=name,
                                          run_config=config).success  # fmt: skip

        k = DAGSTER_PROXIES
        out["dagster_in_process"] = _measure(in_process, names[:k], root)
        out["dagster_torchrun"] = _measure(launcher, names[k : 2 * k], root)
        if ray:
            out["dagster_ray"] = _ray(names[2 * k :], root, tmp)
    for path, row in out.items():
        print(f"overhead {path}: wall {row['wall_s']['mean']:.1f}s = steps "
              f"{row['steps_s']['mean']:.1f}s + {row['overhead_s']['mean']:.1f}s "
              f"(n={row['wall_s']['n']})", flush=True)  # fmt: skip
    return out


def _ray(names: list[str], root: Path, tmp: Path) -> dict:
    """The proxies as one run each through dagster-ray's executor (each step a Ray job)."""
    from dagster import DagsterInstance, execute_job, reconstructable

    import app.ray_definitions as factories
    from tests.servers.ray_cluster import node_env, ray_cluster

    # a run takes the job's default config: the torchrun launcher, the task cache (pointed at
    # an empty folder here, so that no task is scored, as on the other paths)
    (tmp / "no-tasks").mkdir()
    (tmp / "ray").mkdir()
    os.environ["PRETRAIN_EVAL_DIR"] = str(tmp / "no-tasks")
    with ray_cluster(tmp / "ray") as cluster:
        os.environ.update({"RAY_ADDRESS": cluster.dashboard_url, "PATH": node_env()["PATH"],
                           "PYTHONPATH": str(Path(__file__).resolve().parents[1])})  # fmt: skip
        factories.ray_definitions.cache_clear()  # built again with this PRETRAIN_ROOT
        job = reconstructable(factories.proxy_runs_on_ray)
        with DagsterInstance.get() as instance:

            def one(name: str) -> None:
                with execute_job(job, instance, tags={"dagster/partition": name}) as result:
                    assert result.success, name

            return _measure(one, names, root)
