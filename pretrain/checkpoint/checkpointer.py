"""The save side of checkpointing: collective DCP writes, synchronous or asynchronous, and the commit.

    checkpointer = Checkpointer(cfg.checkpoint, proc, branch="b00", run_config=cfg.to_dict(),
                                on_commit=[lambda path, meta: ...])
    checkpointer.save(model=model, optimizer=optimizer, step=40, meta={...})  # collective;
                             # returns the committed step-40 dir (None while an async save runs)
    checkpointer.wait()      # commit an async save still in flight (no-op when sync or idle)
    checkpointer.close()     # wait, then release the async process group

Protocol (see :mod:`pretrain.checkpoint.dcp` for the layout): every rank writes its shards
and RNG state under ``<branch>/.tmp-step-<N>``; after every rank has finished, rank 0 writes
``meta.json`` and ``_COMMITTED`` (with every file's size and checksum, each rank hashing its own
files: :mod:`pretrain.checkpoint.integrity`), renames the folder to ``step-<N>`` (the commit: a
visible step folder always holds its marker; on S3 the marker is the last object instead), labels
it healthy when the trainer asked for it, and prunes; then ``on_commit`` callbacks run on every
rank.

With ``async_save`` (``checkpoint.async_save``), ``torch.distributed.checkpoint.async_save``
stages the state dict to CPU memory (a copy, so training may update the weights at once) and
writes it in a background thread over a dedicated gloo process group (the default group keeps
serving training collectives). The commit of step N happens at the next ``save``/``wait``, so
at most one save is in flight and the ``checkpoint`` event of step N arrives late; a crash
before the commit leaves only a ``.tmp-`` folder, which the next save of that step removes.
On CPU the same path runs (tests cover it); the win is on GPU, where the write overlaps the
next steps.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.checkpoint.state_dict_saver import AsyncSaveResponse

import pretrain
from pretrain import identity, storage
from pretrain.checkpoint import integrity, remote
from pretrain.checkpoint.config import CheckpointConfig
from pretrain.checkpoint.dcp import (
    META,
    _single_process_quiet,
    checkpoint_key,
    mark_healthy,
    prune_checkpoints,
    step_dir_name,
    weights_fingerprint,
)
from pretrain.distributed import ProcessInfo, all_gather_objects, barrier, rng_state
from pretrain.errors import CheckpointError

CommitCallback = Callable[[Path | str, dict[str, Any]], None]


@dataclass(kw_only=True)
class _InFlight:
    step: int
    tmp: Path
    final: Path | str  # str: an s3:// URI
    meta: dict[str, Any]
    future: Future | None = None
    healthy_reason: str | None = None


class Checkpointer:
    """Collective checkpoint writer for one training invocation (every rank builds one)."""

    def __init__(
        self,
        cfg: CheckpointConfig,
        proc: ProcessInfo,
        *,
        branch: str,
        run_config: Mapping[str, Any],
        async_save: bool | None = None,
        on_commit: list[CommitCallback] | None = None,
    ) -> None:
        """``run_config``: the resolved run config (``TrainConfig.to_dict()``), recorded in every
        checkpoint's ``meta.json`` as ``config``; its ``model`` section is what loads it."""
        self.cfg, self.proc, self.branch = cfg, proc, branch
        self.run_config = dict(run_config)
        self.async_save = cfg.async_save if async_save is None else async_save
        self.on_commit = list(on_commit or [])
        self._in_flight: _InFlight | None = None
        self._group = None
        if self.async_save and proc.distributed:
            # collective: every rank creates it at the same point of start-up
            self._group = dist.new_group(backend="gloo")

    def save(
        self,
        *,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        step: int,
        meta: dict[str, Any],
        healthy_reason: str | None = None,
    ) -> Path | str | None:
        """Write step ``step``; commits it and returns its directory, or returns None with the
        write in flight (``async_save``; :meth:`wait` commits it).

        ``healthy_reason`` labels the checkpoint healthy at commit (see ``mark_healthy``);
        ``meta`` goes into ``meta.json`` (the trainer records its resolved config and lineage)."""
        self.wait()
        cfg, proc, branch = self.cfg, self.proc, self.branch
        on_s3 = cfg.is_remote()
        # s3://: a URI, staged in the local branch dir of every node; else the local folder
        final: Path | str = (
            cfg.checkpoint_uri(branch, step_dir_name(step))
            if on_s3
            else cfg.branch_dir(branch) / step_dir_name(step)
        )
        tmp = cfg.branch_dir(branch) / f".tmp-{step_dir_name(step)}"
        if proc.is_main and storage.is_committed(str(final)):
            raise CheckpointError(
                f"{final} already exists; a branch never rewrites a step — resume onto a "
                "new branch (run.branch) instead"
            )
        if proc.local_rank == 0 if on_s3 else proc.is_main:  # one per node / shared folder
            for stale in (tmp,) if on_s3 else (tmp, final):  # a crash's leftovers
                shutil.rmtree(stale, ignore_errors=True)
            tmp.mkdir(parents=True)
        barrier(proc)
        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        torch.save(rng_state(proc), tmp / f"rng-rank{proc.rank:05d}.pt")
        # computed from the live weights now: identical to what the (staged) save writes
        fingerprint = weights_fingerprint(model, distributed=proc.distributed)
        full_meta = {
            "weights_fingerprint": fingerprint,
            "step": step,
            "branch": branch,
            "key": checkpoint_key(branch, step),
            "world_size": proc.world_size,
            "code_version": pretrain.__version__,
            "config": self.run_config,
            **meta,
        }
        full_meta["identity"] = checkpoint_identity(full_meta).version
        flight = _InFlight(
            step=step, tmp=tmp, final=final, meta=full_meta, healthy_reason=healthy_reason
        )
        with _single_process_quiet():
            if self.async_save:
                saving = dcp.async_save(
                    state,
                    checkpoint_id=str(tmp),
                    process_group=self._group,
                    no_dist=not proc.distributed,
                )
                # a response object only with a zero-overhead stager, which we do not pass
                if isinstance(saving, AsyncSaveResponse):
                    saving = saving.upload_completion
                flight.future = saving
            else:
                dcp.save(state, checkpoint_id=str(tmp), no_dist=not proc.distributed)
        self._in_flight = flight
        return None if self.async_save else self.wait()

    @property
    def in_flight_step(self) -> int | None:
        return self._in_flight.step if self._in_flight else None

    def wait(self) -> Path | str | None:
        """Finish and commit the save in flight (collective); returns its directory or None."""
        flight, self._in_flight = self._in_flight, None
        if flight is None:
            return None
        if flight.future is not None:
            flight.future.result()  # re-raises a failed background write
        # each rank hashes the files it wrote (spreads the cost), rank 0 merges the lists
        mine = integrity.digest_files(flight.tmp, integrity.rank_files(flight.tmp, self.proc.rank))
        cfg = self.cfg
        if isinstance(flight.final, str):  # s3://: each rank uploads its own files
            remote.upload_files(flight.tmp, sorted(mine), flight.final)
        gathered = all_gather_objects(mine, self.proc)  # also: every upload has finished
        if self.proc.is_main:
            storage.write_json(flight.meta, str(flight.tmp / META))
            identity.write(str(flight.tmp), checkpoint_identity(flight.meta))
            files = {name: rec for part in gathered for name, rec in part.items()}
            files.update(integrity.digest_files(flight.tmp, [META, identity.IDENTITY_FILE]))
            unclaimed = sorted(set(os.listdir(flight.tmp)) - set(files))
            if unclaimed:  # a file no rank recognised would go unverified: refuse to commit
                raise CheckpointError(
                    f"{flight.tmp} holds files no rank claims {unclaimed}; not committing it"
                )
            record = {
                "step": flight.step,
                "key": flight.meta["key"],
                "checksum": integrity.CHECKSUM,
                "files": files,
            }
            if isinstance(flight.final, str):  # the commit record is the last object
                remote.upload_files(flight.tmp, [META, identity.IDENTITY_FILE], flight.final)
                remote.commit(flight.final, record)
            else:  # the marker goes in first: the rename is the commit, so a crash at any
                # point leaves either a hidden .tmp- folder or a committed step-<N>, never a
                # visible step folder without its marker
                storage.commit_marker(str(flight.tmp), record)
                os.rename(flight.tmp, flight.final)
            if flight.healthy_reason:
                mark_healthy(flight.final, flight.healthy_reason)
            prune_checkpoints(
                cfg.run_root, self.branch, cfg.keep_last, protected=cfg.protected_steps
            )
        barrier(self.proc)
        if isinstance(flight.final, str) and self.proc.local_rank == 0:
            shutil.rmtree(flight.tmp, ignore_errors=True)  # uploaded; resume downloads
        for callback in self.on_commit:
            callback(flight.final, flight.meta)
        return flight.final

    def close(self) -> None:
        """Commit anything in flight and release the async process group."""
        try:
            self.wait()
        finally:
            if self._group is not None:
                dist.destroy_process_group(self._group)
                self._group = None


def checkpoint_identity(meta: dict[str, Any]) -> identity.Identity:
    """A committed checkpoint never changes, and nothing upstream can make it stale: its identity
    (``_identity.json``, the Dagster data version of ``checkpoints[key]``) is a hash of its key,
    the run config that trained it and its weights' fingerprint, with no inputs. What it was
    trained on is lineage in ``meta.json`` (``packed_tokens_version``, ``config_sha256``)."""
    content = {k: meta[k] for k in ("key", "config", "weights_fingerprint")}
    return identity.compute("checkpoints", str(meta["code_version"]), content, inputs=[])


def save_checkpoint(
    *,
    cfg: CheckpointConfig,
    branch: str,
    run_config: Mapping[str, Any],
    proc: ProcessInfo,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    step: int,
    meta: dict[str, Any],
) -> Path | str:
    """Collective, synchronous save; returns the committed ``step-<N>`` directory (its URI
    string when the checkpoint root is ``s3://``).

    The trainer uses :class:`Checkpointer` (async option, commit
    callbacks); this is the one-call form of it."""
    checkpointer = Checkpointer(cfg, proc, branch=branch, run_config=run_config, async_save=False)
    path = checkpointer.save(model=model, optimizer=optimizer, step=step, meta=meta)
    assert path is not None  # a synchronous save commits before returning
    return path


def healthy_reason(cfg: CheckpointConfig, step: int, losses: list[float]) -> str | None:
    """Why the checkpoint at ``step`` is labelled healthy at save time, or None.

    Only every ``checkpoint.healthy_every_steps`` (0: never), and only if every loss in the
    window is finite; spike-based judgement belongs to the recovery loop, which labels more
    checkpoints later with :func:`pretrain.checkpoint.dcp.mark_healthy`."""
    every = cfg.healthy_every_steps
    if not every or step % every or not losses or not all(map(math.isfinite, losses)):
        return None
    return f"finite loss window of {len(losses)} steps at a healthy_every_steps={every} boundary"
