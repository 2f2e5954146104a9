"""The trainer's command line: the same code runs alone, under torchrun, and from Dagster.

One process (no FSDP), a named recipe on packed tokens::

    python -m pretrain.train --recipe debug_tiny --packed artifacts/packed_tokens --out runs \\
        --max-steps 40

Two processes with FSDP2 (gloo on CPU, NCCL on GPUs) from a resolved config::

    python -m pretrain.train --recipe debug_tiny --packed artifacts/packed_tokens --out runs \\
        --print-config > run.json
    torchrun --standalone --nproc_per_node=2 -m pretrain.train --config run.json

The Dagster training op writes ``run.json`` and runs that torchrun command with
``--event-sink jobs.pipes_sink:PipesEventSink``. Other flags: ``--max-steps N`` (stop after
global step N; with ``--recipe`` also the LR-schedule horizon), ``--branch B``, ``--resume
latest|none|PATH``, ``--wandb-mode offline|online|disabled``.

Environment (the launcher sets these; set them yourself when running by hand on CPU)::

    OMP_NUM_THREADS=<cores per process>
    MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824

The ``MALLOC_*`` values stop glibc from returning large tensor buffers to the kernel after every
step (measured: up to half of a small CPU training step's time went to page faults).

Writes ``<out>/<branch>/step-<N:08d>/`` checkpoints, ``<out>/<branch>/metrics.jsonl``,
``<out>/<branch>/events.jsonl`` and ``<out>/wandb/offline-run-*``, and prints a progress line
every ``metrics.console_every_steps`` steps on rank 0. With an ``s3://`` run root the checkpoints
go there and the other files are written to a local staging folder and mirrored to the run root
(``<out>/<branch>/metrics.jsonl`` …; :mod:`pretrain.train.mirror`).

SIGTERM/SIGINT stop gracefully: the current step finishes, every rank agrees, a checkpoint of
that step is committed (``run.checkpoint_on_stop``, default true), a ``stopped`` event is
emitted and the process exits 0; ``--resume latest`` continues from exactly there. Exit status:
0 when done or stopped (the last event, ``finished`` or ``stopped``, tells which), 1 on error.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.train.config import TrainConfig
from pretrain.train.events import EventSink, FanoutSink, JsonlEventSink, NullSink, load_sink


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pretrain.train", description=__doc__.split("\n")[0]
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help="resolved TrainConfig JSON (run.json)")
    source.add_argument("--recipe", help="training recipe name, e.g. debug_tiny")
    parser.add_argument("--packed", help="packed_tokens directory (with --recipe)")
    parser.add_argument("--out", help="run root for checkpoints, metrics and W&B (with --recipe)")
    parser.add_argument("--max-steps", type=int, help="stop after this global step")
    parser.add_argument("--branch", help="branch id, e.g. b01")
    parser.add_argument("--resume", help="latest | none | path to a step-<N> checkpoint")
    parser.add_argument("--wandb-mode", choices=["offline", "online", "disabled"])
    parser.add_argument("--event-sink", help="extra event sink 'module:Class' (rank 0 only)")
    parser.add_argument("--print-config", action="store_true", help="print resolved JSON, exit")
    return parser.parse_args(argv)


def resolve_config(args: argparse.Namespace) -> TrainConfig:
    if args.recipe:
        if not args.packed or not args.out:
            raise ConfigError("--recipe needs --packed DIR and --out DIR")
        from pretrain.train.recipes import get_train_recipe

        kwargs = {"packed_dir": args.packed, "out_dir": args.out}
        if args.max_steps:
            kwargs["max_steps"] = args.max_steps
        cfg = get_train_recipe(args.recipe)(**kwargs)
    else:
        # a local path or an s3:// URI (a node without a shared filesystem)
        cfg = TrainConfig.from_json(storage.read_bytes(args.config).decode())
        if args.max_steps:
            cfg = cfg.replace(run=dataclasses.replace(cfg.run, max_steps=args.max_steps))
    run_changes = {k: v for k, v in (("branch", args.branch), ("resume", args.resume)) if v}
    if run_changes:
        cfg = cfg.replace(run=dataclasses.replace(cfg.run, **run_changes))
    if args.wandb_mode:
        cfg = cfg.replace(metrics=dataclasses.replace(cfg.metrics, wandb_mode=args.wandb_mode))
    return cfg


def build_event_sink(cfg: TrainConfig, spec: str | None, is_main: bool) -> EventSink:
    if not is_main:
        return NullSink()
    sinks: list[EventSink] = [JsonlEventSink(cfg.events_path())]
    if spec:
        sinks.append(load_sink(spec))
    return FanoutSink(sinks)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = resolve_config(args)
    if args.print_config:
        print(cfg.to_json())
        return 0

    # torch loads only past this point: --print-config and --help stay fast
    from pretrain.distributed import (
        ProcessInfo,
        StopFlag,
        barrier,
        close_process_group,
        init_process_group,
    )
    from pretrain.train.loop import train
    from pretrain.train.metrics import Metrics, MetricsLogger, NullMetrics
    from pretrain.train.mirror import MirrorCallback, RunFilesMirror

    proc = ProcessInfo.from_env()
    stop = StopFlag().install()
    events: EventSink = NullSink()
    metrics: Metrics = NullMetrics()
    # an s3:// run root: rank 0 copies its run files there for the sensors (pretrain.train.mirror)
    mirror = RunFilesMirror.for_config(cfg) if proc.is_main else None
    try:
        init_process_group(proc)
        if mirror is not None:
            mirror.restore()  # before the sinks open their files for appending
        events = build_event_sink(cfg, args.event_sink, proc.is_main)
        metrics = MetricsLogger(cfg) if proc.is_main else NullMetrics()
        callbacks = [MirrorCallback(mirror)] if mirror is not None else []
        try:
            result = train(
                cfg, proc, events=events, metrics=metrics, stop=stop, callbacks=callbacks
            )
        except BaseException as exc:
            events.emit({"event": "failed", "error": f"{type(exc).__name__}: {exc}"})
            raise
        if result.stopped_by:
            print(
                f"stopped by {result.stopped_by} after step {result.step}; checkpoint: "
                f"{result.last_checkpoint}",
                flush=True,
            )
        return 0
    finally:
        in_flight = sys.exc_info()[1]  # the training error propagating through here, if any
        closed = False
        try:
            events.close()
            metrics.close()  # W&B finishes writing its file here
            if mirror is not None:
                try:
                    mirror.sync()  # the last rows and the final event, also after a failure
                except Exception as exc:
                    if in_flight is None:  # no training error to report: this one is it
                        raise
                    # keep the training error as the cause; say the upload failed too
                    print(f"run files not mirrored to the run root: {exc}", file=sys.stderr)
            closed = True
        finally:
            if closed and in_flight is None:
                # Every rank waits until rank 0 has closed its files (W&B takes seconds), so
                # the ranks tear the group down together. Not after an error: a rank may be
                # gone, and the barrier would wait for it.
                barrier(proc)
            # frees the group and joins its threads before the interpreter exits (a gloo
            # group still alive at exit aborted rank 1 after finished runs: see there)
            close_process_group()
            stop.restore()


if __name__ == "__main__":
    sys.exit(main())
