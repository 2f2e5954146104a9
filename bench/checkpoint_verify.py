"""What checkpoint checksums cost, and checkpoints on S3 against local ones.

    .venv/bin/python bench/checkpoint_verify.py                  # ~3 minutes on 2 cores
    .venv/bin/python bench/checkpoint_verify.py --repeats 1 --skip-big --skip-s3

Part 1 (issue 19 item 14; target: verification <= 5% of save time), for the demo model
(``debug_tiny``, vocab 4096, 1.26 M parameters) and a bigger one (``llama_125m``, vocab 32000),
each with AdamW moments (one optimizer step taken), single process on CPU:

- ``save_s``      — the trainer's synchronous save (:func:`pretrain.checkpoint.dcp.save_checkpoint`:
                    DCP write with fsync, RNG file, meta.json, the rename and the commit record),
                    *including* the per-file hashing it now does;
- ``digest_s``    — the hashing part alone (xxh3_64 of every file, what the commit record adds);
- ``verify_s``    — :func:`pretrain.checkpoint.dcp.checkpoint_problems` on the committed
                    checkpoint (sizes, then every file's checksum), what a resume adds;
- ``load_s``      — :func:`pretrain.checkpoint.dcp.load_consolidated_model` (verify + DCP load).

The files were just written, so they are read back from the page cache (the same is true of a
resume on the machine that saved); from a cold disk both verification and the load itself read
every byte once, so the ratio to the load stays similar. Each measurement is the best of
``--repeats`` (the machine is shared).

Part 2 (issue 15 item 4): save and load of the demo model with ``checkpoint.run_root`` local vs
``s3://`` on a local ``moto_server`` (upload of every file + the commit record last; download +
verify + load).

Prints a table per part and ends with ONE JSON line; results go to ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def build(model_cfg: Any, run_root: str, staging: Path) -> tuple[Any, Any, Any]:
    """(TrainConfig, model, optimizer with moments) for ``model_cfg``."""
    import torch

    from pretrain.distributed import ProcessInfo
    from pretrain.train.optim import build_optimizer
    from pretrain.train.parallel import build_model
    from tests.helpers.eval_models import checkpoint_config

    cfg = checkpoint_config(
        model_cfg,
        run_root,
        max_steps=1000,
        schedule_steps=1000,
        packed_dir="unused",
        keep_last=1000,
        staging_dir=str(staging),
    )
    model = build_model(model_cfg, ProcessInfo(), seed=0)
    optimizer = build_optimizer(model, cfg.optim)
    tokens = torch.randint(0, model_cfg.vocab_size, (1, 17))
    logits = model(tokens[:, :-1])
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
    optimizer.step()  # AdamW moments exist: the checkpoint holds what a real one holds
    return cfg, model, optimizer


def save(cfg: Any, model: Any, optimizer: Any, *, step: int) -> Path:
    """The trainer's synchronous save of ``model`` and ``optimizer`` at ``step``."""
    from tests.helpers.training import save_model

    return save_model(cfg, model, step=step, meta={"tokens_seen": 0}, optimizer=optimizer)


def best(fn: Callable[[int], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for i in range(repeats):
        started = time.perf_counter()
        out = fn(i)
        times.append(time.perf_counter() - started)
    return min(times), out


def measure_verify(name: str, model_cfg: Any, root: Path, repeats: int) -> dict[str, Any]:
    from pretrain.checkpoint import integrity
    from pretrain.checkpoint.dcp import (
        checkpoint_problems,
        load_consolidated_model,
        read_commit_record,
    )

    run_root = root / name
    cfg, model, optimizer = build(model_cfg, str(run_root), root / "staging")
    save_s, path = best(lambda i: save(cfg, model, optimizer, step=i + 1), repeats)
    names = sorted(read_commit_record(path)["files"])
    digest_s, _ = best(lambda _: integrity.digest_files(path, names), repeats)
    verify_s, problems = best(lambda _: checkpoint_problems(path), repeats)
    assert problems == [], problems
    load_s, _ = best(lambda _: load_consolidated_model(str(path)), repeats)
    num_bytes = sum(p.stat().st_size for p in path.iterdir())
    num_params = sum(p.numel() for p in model.parameters())
    shutil.rmtree(run_root)
    return {
        "model": name,
        "params": num_params,
        "checkpoint_mb": round(num_bytes / 2**20, 1),
        "save_s": round(save_s, 4),
        "digest_s": round(digest_s, 4),
        "verify_s": round(verify_s, 4),
        "load_s": round(load_s, 4),
        "digest_pct_of_save": round(100 * digest_s / save_s, 2),
        "verify_pct_of_save": round(100 * verify_s / save_s, 2),
        "verify_gb_per_s": round(num_bytes / verify_s / 1e9, 2),
    }


def measure_s3(model_cfg: Any, root: Path, repeats: int) -> dict[str, Any]:
    from pretrain.checkpoint.dcp import load_consolidated_model
    from tests.servers.s3_server import moto_s3

    out: dict[str, Any] = {}
    with moto_s3():
        for where, run_root in (("local", str(root / "local")), ("s3", "s3://campaign/runs")):
            built = build(model_cfg, run_root, root / f"staging-{where}")
            save_s, path = best(lambda i, built=built: save(*built, step=i + 1), repeats)
            load_s, _ = best(lambda _, path=path: load_consolidated_model(str(path)), repeats)
            out[f"{where}_save_s"] = round(save_s, 4)
            out[f"{where}_load_s"] = round(load_s, 4)
    out["s3_vs_local_save"] = round(out["s3_save_s"] / out["local_save_s"], 2)
    out["s3_vs_local_load"] = round(out["s3_load_s"] / out["local_load_s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true", help="only the demo model")
    parser.add_argument("--skip-s3", action="store_true", help="no moto_server part")
    args = parser.parse_args()

    import torch

    from pretrain.model.recipes import debug_tiny, llama_125m

    torch.set_num_threads(2)
    models = {"debug_tiny": debug_tiny(vocab_size=4096, max_seq_len=256)}
    if not args.skip_big:
        models["llama_125m"] = llama_125m(vocab_size=32000, max_seq_len=256)
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-") as tmp:
        rows = [measure_verify(n, m, Path(tmp), args.repeats) for n, m in models.items()]
        s3 = None if args.skip_s3 else measure_s3(models["debug_tiny"], Path(tmp), args.repeats)

    print(f"{'model':<12}{'params':>12}{'MB':>9}{'save s':>9}{'digest s':>10}{'verify s':>10}"
          f"{'load s':>9}{'verify/save':>13}{'GB/s':>7}")  # fmt: skip
    for r in rows:
        print(f"{r['model']:<12}{r['params']:>12,}{r['checkpoint_mb']:>9}{r['save_s']:>9.3f}"
              f"{r['digest_s']:>10.3f}{r['verify_s']:>10.3f}{r['load_s']:>9.3f}"
              f"{r['verify_pct_of_save']:>12.2f}%{r['verify_gb_per_s']:>7}")  # fmt: skip
    if s3:
        print(f"\ndemo model, local vs s3 (moto): save {s3['local_save_s']:.3f} s vs "
              f"{s3['s3_save_s']:.3f} s ({s3['s3_vs_local_save']}x), load {s3['local_load_s']:.3f}"
              f" s vs {s3['s3_load_s']:.3f} s ({s3['s3_vs_local_load']}x)")  # fmt: skip
    summary = {
        "bench": "checkpoint_verify",
        "checksum": "xxh3_64",
        "repeats": args.repeats,
        "models": rows,
        "max_verify_pct_of_save": max(r["verify_pct_of_save"] for r in rows),
        "target_verify_pct_of_save": 5.0,
        "s3_demo": s3,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
