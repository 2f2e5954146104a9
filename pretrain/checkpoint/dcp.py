"""Atomic, resumable checkpoints with ``torch.distributed.checkpoint`` (DCP).

Layout (one directory per step, per branch)::

    <run_root>/<branch>/step-00000040/
        .metadata, __0_0.distcp, ...   DCP: {"model": ..., "optim": ...} via get_state_dict
        rng-rank00000.pt ...           per-rank RNG states (python, numpy, torch, cuda)
        meta.json                      step, data-reader state, resolved config, lineage,
                                       loss window, skipped steps, tokens seen, fingerprint
        _COMMITTED                     written last, before the folder is renamed into place
        HEALTHY                        optional label, added after the commit

Protocol: all ranks write into ``<branch>/.tmp-step-<N:08d>``; after a barrier rank 0 writes
``meta.json`` and ``_COMMITTED``, then renames the folder to ``step-<N:08d>`` (on S3, where
there is no rename, ``_COMMITTED`` is the last object). Readers
(:func:`latest_checkpoint`, :func:`list_checkpoints`) only see committed ``step-*`` folders, so a
crash at any point leaves nothing half-visible. Older committed checkpoints beyond
``keep_last`` are renamed away, then deleted — except ``protected_steps`` and checkpoints
labelled healthy (:func:`mark_healthy`), the rollback targets of the recovery loop. The save
side (sync or async) is :mod:`pretrain.checkpoint.checkpointer`; the consolidated, topology-free
export is :mod:`pretrain.train.export`.

Naming and listing are torch-free (sensors import them); torch loads inside save/load.

    latest_checkpoint("runs", "b00")             # Path('runs/b00/step-00000040') or None
    checkpoint_key("b00", 40)                    # 'b00-s000000040' (Dagster partition key)
    mark_healthy("runs/b00/step-00000040", reason="no spike through step 60")
    latest_healthy_checkpoint("runs", "b00", before_step=57)
    model = load_consolidated_model("runs/b00/step-00000040")   # one process, no process group
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from pretrain import storage
from pretrain.checkpoint import integrity, remote
from pretrain.checkpoint.config import CheckpointConfig
from pretrain.errors import CheckpointError, DataError
from pretrain.model.config import ModelConfig

if TYPE_CHECKING:
    import torch
    from torch import nn

    from pretrain.distributed import ProcessInfo
    from pretrain.model.transformer import Transformer

META = "meta.json"
HEALTHY = "HEALTHY"
_STEP_RE = re.compile(r"^step-(\d{8})$")


@contextlib.contextmanager
def _single_process_quiet() -> Iterator[None]:
    """DCP warns on every single-process save/load, even with no_dist=True; here it is intended."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def checkpoint_key(branch: str, step: int) -> str:
    return f"{branch}-s{step:09d}"


def parse_checkpoint_key(key: str) -> tuple[str, int]:
    """Inverse of :func:`checkpoint_key`: ``b00-s000000040`` -> ``("b00", 40)``.

    Branch names may contain '-': the step is the part after the last ``-s``."""
    branch, sep, step = key.rpartition("-s")
    if not sep or not branch or not step.isdigit():
        raise CheckpointError(f"{key!r} is not a checkpoint key like 'b00-s000000040'")
    return branch, int(step)


def checkpoint_dir_for_key(run_root: str | Path, key: str) -> Any:
    """``b00-s000000040`` -> ``<run_root>/b00/step-00000040``."""
    branch, step = parse_checkpoint_key(key)
    if storage.is_s3(str(run_root)):
        return storage.join(str(run_root), branch, step_dir_name(step))
    return Path(run_root) / branch / step_dir_name(step)


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def list_branches(run_root: str | Path) -> list[str]:
    """Names of the branch folders under ``run_root`` (local or ``s3://``), sorted."""
    fs, path = storage.filesystem(str(run_root))
    try:
        entries = fs.get_file_info(pafs.FileSelector(path, recursive=False))
    except FileNotFoundError:
        return []
    return sorted(e.base_name for e in entries if e.type == pafs.FileType.Directory)


def list_checkpoints(run_root: str | Path, branch: str) -> list[Any]:
    """Committed checkpoints of ``branch``, oldest first: ``Path``s, or URI strings when
    ``run_root`` is ``s3://`` (:mod:`pretrain.checkpoint.remote`)."""
    if storage.is_s3(str(run_root)):
        return remote.list_committed(str(run_root), branch)
    branch_dir = Path(run_root) / branch
    if not branch_dir.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in branch_dir.iterdir()
        if (m := _STEP_RE.match(p.name)) and p.is_dir() and storage.is_committed(str(p))
    ]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_root: str | Path, branch: str) -> Any:
    found = list_checkpoints(run_root, branch)
    return found[-1] if found else None


def read_meta(ckpt_dir: str | Path) -> dict[str, Any]:
    path = str(ckpt_dir)
    if not storage.is_committed(path):
        raise CheckpointError(f"{path} is not a committed checkpoint (no {storage.COMMITTED})")
    try:
        return storage.read_json(storage.join(path, META))
    except (OSError, DataError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}/{META} is missing or unreadable: {exc}") from exc


def read_commit_record(ckpt_dir: str | Path) -> dict[str, Any]:
    """The ``_COMMITTED`` record of a checkpoint (step, key, and the files with their sizes and
    checksums)."""
    try:
        record = storage.read_json(storage.join(str(ckpt_dir), storage.COMMITTED))
    except (DataError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{ckpt_dir}: commit record missing or unreadable: {exc}") from exc
    if not isinstance(record, dict):
        raise CheckpointError(f"{ckpt_dir}/{storage.COMMITTED} is not a JSON object")
    return record


def checkpoint_problems(ckpt_dir: str | Path, *, checksums: bool = True) -> list[str]:
    """What is wrong with a committed checkpoint's files (sizes, then checksums, against its
    commit record; local or ``s3://``); ``[]`` when it is intact. Reads every file once (xxh3:
    cheap), or none with ``checksums=False`` (sizes only)."""
    try:
        record = read_commit_record(ckpt_dir)
    except CheckpointError as exc:
        return [str(exc)]
    files = record.get("files")
    if not isinstance(files, dict):
        return [
            "the commit record lists no file sizes or checksums (written before they were "
            "recorded), so the files cannot be verified"
        ]
    return integrity.verify_files(ckpt_dir, files, checksums=checksums)


def verify_checkpoint(ckpt_dir: str | Path) -> None:
    """Raise ``CheckpointError`` naming every damaged file unless the checkpoint is intact."""
    problems = checkpoint_problems(ckpt_dir)
    if problems:
        raise CheckpointError(
            f"{ckpt_dir} is damaged: "
            + "; ".join(problems)
            + " (use an intact checkpoint: `pretrain status` marks the damaged ones)"
        )


@dataclass(frozen=True, kw_only=True)
class DamagedCheckpoint:
    path: Any  # where it was (a Path, or an s3:// URI)
    moved_to: Any  # where resume set it aside (out of the step-* namespace), if it did
    problems: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ResumeChoice:
    """Where a run starts (``path``: local Path or ``s3://`` URI; ``local``: the verified local
    folder to load, the same Path for a local run root) and the newer checkpoints passed over."""

    path: Any = None
    local: Path | None = None
    damaged: tuple[DamagedCheckpoint, ...] = ()


def local_copy(cfg: CheckpointConfig, ckpt: str | Path) -> tuple[Path, list[str]]:
    """A checkpoint as a local folder and its problems (``[]``: intact). An ``s3://`` one is
    downloaded into ``<staging>/.downloads/<branch>/step-<N>`` first."""
    if isinstance(ckpt, str) and storage.is_s3(ckpt):
        branch = ckpt.rstrip("/").rsplit("/", 2)[-2]
        local = cfg.local_root() / ".downloads" / branch / Path(ckpt).name
        try:
            remote.download_checkpoint(ckpt, local)
        except (CheckpointError, DataError) as exc:
            return local, [str(exc)]
        return local, checkpoint_problems(local)
    return Path(ckpt), checkpoint_problems(ckpt)


def resolve_resume(
    cfg: CheckpointConfig, *, branch: str, resume: str, quarantine: bool = False
) -> ResumeChoice:
    """The checkpoint a run of ``branch`` starts from, verified against its commit record.

    ``resume`` (a run's ``run.resume``): ``none`` -> no checkpoint; ``latest`` -> the newest *intact* committed checkpoint of this
    branch: damaged newer ones are passed over (and, with ``quarantine``, set aside — renamed to
    ``.damaged-step-<N>`` locally, where the files stay for inspection; on S3 the record moves to
    ``_DAMAGED`` and a rewrite of that step replaces the files) so the branch can write those
    steps again. Committed checkpoints that are all
    damaged raise rather than silently starting over. A given directory must be intact (an
    explicit choice never falls back). S3 checkpoints are downloaded and verified locally."""
    if resume == "none":
        return ResumeChoice()
    if resume != "latest":
        given: Any = resume if storage.is_s3(resume) else Path(resume)
        if not storage.is_committed(str(given)):
            raise CheckpointError(
                f"run.resume={resume!r} is not a committed checkpoint directory "
                "(expected <run_root>/<branch>/step-<N:08d> with a _COMMITTED marker)"
            )
        local, problems = local_copy(cfg, given)
        if problems:
            raise CheckpointError(f"{given} is damaged: " + "; ".join(problems))
        return ResumeChoice(path=given, local=local)
    damaged: list[DamagedCheckpoint] = []
    for path in reversed(list_checkpoints(cfg.run_root, branch)):
        local, problems = local_copy(cfg, path)
        if not problems:
            return ResumeChoice(path=path, local=local, damaged=tuple(damaged))
        moved = None
        if quarantine:
            moved = (
                remote.set_aside(path, problems)
                if isinstance(path, str)
                else (quarantine_checkpoint(path))
            )
        damaged.append(DamagedCheckpoint(path=path, moved_to=moved, problems=tuple(problems)))
    if damaged:
        raise CheckpointError(
            f"branch {branch!r} has no intact checkpoint to resume from: "
            + "; ".join(f"{Path(d.path).name}: {', '.join(d.problems)}" for d in damaged)
            + " (resume from another branch's checkpoint with run.resume=<dir>, or "
            "run.resume=none on a new branch)"
        )
    return ResumeChoice()


def quarantine_checkpoint(path: Path) -> Path:
    """Rename a damaged checkpoint out of the ``step-*`` namespace (kept for inspection)."""
    target = path.with_name(f".damaged-{path.name}")
    suffix = 1
    while target.exists():
        target = path.with_name(f".damaged-{path.name}.{suffix}")
        suffix += 1
    os.rename(path, target)
    return target


def damage_reports(run_root: str | Path, branch: str) -> list[dict[str, Any]]:
    """The ``checkpoint_damaged`` events of a branch (from its ``events.jsonl``), oldest first:
    which checkpoints resume passed over, why, and where it resumed instead. For ``pretrain
    status`` and the sensors; torch-free. On an ``s3://`` run root: the trainer's mirror of the
    file (:mod:`pretrain.train.mirror`)."""
    events = storage.join(str(run_root), branch, "events.jsonl")
    if not storage.exists(events):
        return []
    found = []
    for line in storage.read_bytes(events).decode(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash; the others still count
        if isinstance(event, dict) and event.get("event") == "checkpoint_damaged":
            found.append(event)
    return found


@dataclass(frozen=True, kw_only=True)
class RestoredState:
    path: Path
    step: int
    data_state: dict[str, int]
    meta: dict[str, Any]


def weights_fingerprint(model: nn.Module, *, distributed: bool = False) -> dict[str, int]:
    """Exact, order-independent fingerprint of every tensor in ``model.state_dict()``.

    Per tensor: the sum of its raw bit patterns as int64. Integer addition is associative, so
    the value is the same however the tensor is sharded, and any changed element changes it.
    Collective when ``distributed``: sharded (DTensor) entries are summed across ranks.
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    int_view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
    names, sums, sharded = [], [], []
    for name, tensor in model.state_dict().items():
        local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
        local = local.detach().contiguous()
        bits = local.view(int_view[local.dtype]) if local.dtype in int_view else local
        names.append(name)
        sums.append(bits.to(torch.int64).sum())
        sharded.append(isinstance(tensor, DTensor))
    values = torch.stack(sums) if sums else torch.zeros(0, dtype=torch.int64)
    if distributed and any(sharded):
        mask = torch.tensor(sharded, device=values.device)
        reduced = values * mask
        dist.all_reduce(reduced)
        values = torch.where(mask, reduced, values)
    return {name: int(v) for name, v in zip(names, values.tolist(), strict=True)}


def prune_checkpoints(
    run_root: str | Path, branch: str, keep_last: int, protected: tuple[int, ...] = ()
) -> list[Path | str]:
    """Delete committed checkpoints older than the newest ``keep_last``, sparing ``protected``
    steps and checkpoints labelled healthy. Each is renamed out of the ``step-*`` namespace
    first, so it vanishes atomically."""
    removed: list[Path | str] = []
    for path in list_checkpoints(run_root, branch)[:-keep_last]:
        if step_of(path) in protected or is_healthy(path):
            continue
        if isinstance(path, str):  # s3://: the commit record goes first, then the files
            remote.delete_checkpoint(path)
            removed.append(path)
            continue
        doomed = path.with_name(f".deleting-{path.name}")
        os.rename(path, doomed)
        shutil.rmtree(doomed)
        removed.append(path)
    return removed


def step_of(ckpt_dir: str | Path) -> int:
    match = _STEP_RE.match(storage.basename(str(ckpt_dir)))
    if not match:
        raise CheckpointError(f"{ckpt_dir} is not a step-<N:08d> checkpoint directory")
    return int(match.group(1))


def mark_healthy(ckpt_dir: str | Path, reason: str) -> None:
    """Label a committed checkpoint healthy (a rollback target; pruning never deletes it).

    Writes ``HEALTHY`` (JSON: reason, time) atomically next to ``meta.json``; the checkpoint's
    own files are never rewritten. Idempotent."""
    path = str(ckpt_dir)
    if not storage.is_committed(path):
        raise CheckpointError(f"{path} is not a committed checkpoint; cannot label it healthy")
    storage.write_json(
        {"healthy": True, "reason": reason, "time": time.time()}, storage.join(path, HEALTHY)
    )


def is_healthy(ckpt_dir: str | Path) -> bool:
    return storage.exists(storage.join(str(ckpt_dir), HEALTHY))


def latest_healthy_checkpoint(
    run_root: str | Path, branch: str, before_step: int | None = None
) -> Any:
    """Newest checkpoint labelled healthy (with ``step < before_step`` when given), or None."""
    found = [
        p
        for p in list_checkpoints(run_root, branch)
        if is_healthy(p) and (before_step is None or step_of(p) < before_step)
    ]
    return found[-1] if found else None


def _meta_of_model(path: Path, model_cfg: ModelConfig, advice: str) -> dict[str, Any]:
    """The checkpoint's meta, refused unless it was trained with ``model_cfg``."""
    meta = read_meta(path)
    saved_model = meta.get("config", {}).get("model")
    if saved_model is None or ModelConfig.from_dict(saved_model) != model_cfg:
        raise CheckpointError(
            f"{path} was trained with model config {saved_model}, this run has "
            f"{model_cfg.to_dict()}; {advice}"
        )
    return meta


def load_checkpoint(
    path: Path,
    *,
    model_cfg: ModelConfig,
    proc: ProcessInfo,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    verify: bool = True,
) -> RestoredState:
    """Collective: restore model, optimizer and this rank's RNG states in place (the
    checkpoint must have been trained with ``model_cfg``).

    The files are verified against the commit record first (``verify=False`` when the caller
    has just done so, e.g. rank 0 in :func:`resolve_resume`). Nothing is unpickled beyond
    tensors and plain data: DCP's entries through :func:`pretrain.checkpoint.safe_dcp.load_state`,
    the RNG states with ``weights_only=True``."""
    import torch
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    from pretrain.checkpoint.safe_dcp import load_state
    from pretrain.distributed import set_rng_state

    if verify:
        verify_checkpoint(path)
    meta = _meta_of_model(path, model_cfg, "resume with the checkpoint's model config")
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
    with _single_process_quiet():  # nothing unpickled beyond plain data and tensors
        load_state(state, str(path), no_dist=not proc.distributed)
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
    )
    rng_file = path / f"rng-rank{proc.rank:05d}.pt"
    if rng_file.exists():  # absent when resuming on more ranks than the checkpoint had
        try:
            rng = torch.load(rng_file, weights_only=True)
        except Exception as exc:  # an UnpicklingError names the refused global
            raise CheckpointError(
                f"{rng_file} holds more than tensors and plain data (refused: loading it could "
                f"run code); it was written by an older version or tampered with: {exc}"
            ) from exc
        set_rng_state(rng, proc)
    return RestoredState(
        path=path, step=int(meta["step"]), data_state=meta["data_state"], meta=meta
    )


def load_model_weights(
    path: Path, *, model_cfg: ModelConfig, proc: ProcessInfo, model: nn.Module
) -> dict[str, Any]:
    """Collective: the model weights of a verified local checkpoint into ``model``, nothing
    else (no optimizer moments, step, data cursor or RNG): how a run *starts from* another
    run's weights (``run.init_from``) rather than resuming it. Returns the checkpoint's meta."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    from pretrain.checkpoint.safe_dcp import load_state

    verify_checkpoint(path)
    meta = _meta_of_model(path, model_cfg, "start from a checkpoint of the same model")
    state: dict[str, Any] = {"model": get_model_state_dict(model)}
    with _single_process_quiet():
        load_state(state, str(path), no_dist=not proc.distributed)
    set_model_state_dict(model, state["model"])
    return meta


def load_consolidated_model(ckpt_dir: str, model_cfg: ModelConfig | None = None) -> Transformer:
    """The full model of a checkpoint on CPU, in one process without a process group.

    ``model_cfg`` defaults to the one recorded in ``meta.json``. Works for checkpoints written by
    any number of ranks (DCP reshards on load).
    """
    import torch

    from pretrain.checkpoint.safe_dcp import load_state
    from pretrain.model.transformer import Transformer

    if storage.is_s3(str(ckpt_dir)):  # download, verify and load a local copy
        with tempfile.TemporaryDirectory(prefix="pretrain-ckpt-") as tmp:
            local = remote.download_checkpoint(str(ckpt_dir), Path(tmp) / Path(ckpt_dir).name)
            return load_consolidated_model(str(local), model_cfg)
    verify_checkpoint(ckpt_dir)
    meta = read_meta(ckpt_dir)
    cfg = model_cfg or ModelConfig.from_dict(meta["config"]["model"])
    with torch.device("meta"):
        model = Transformer(cfg)
    model.to_empty(device="cpu")
    model.tie_weights()
    model.reset_rope()
    state = {"model": model.state_dict()}
    with _single_process_quiet():  # nothing unpickled beyond plain data and tensors
        load_state(state, str(ckpt_dir), no_dist=True)
    model.load_state_dict(state["model"])
    return model.eval()
