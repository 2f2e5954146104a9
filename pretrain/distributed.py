"""The one object that describes this process, and the process group's lifetime.

``ProcessInfo.from_env()`` is called once, in ``pretrain.train.__main__.main()``; it is the only
place that reads torchrun's ``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE``. Everything else receives
the object.

    proc = ProcessInfo.from_env()
    init_process_group(proc)          # gloo on CPU, nccl on CUDA; no-op when world_size == 1
    try: ...
    finally: close_process_group()
"""

from __future__ import annotations

import gc
import os
import random
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from pretrain.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class ProcessInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProcessInfo:
        env = os.environ if env is None else env
        try:
            rank = int(env.get("RANK", "0"))
            local_rank = int(env.get("LOCAL_RANK", "0"))
            world_size = int(env.get("WORLD_SIZE", "1"))
        except ValueError as exc:
            raise ConfigError(f"RANK/LOCAL_RANK/WORLD_SIZE must be integers: {exc}") from exc
        if torch.cuda.is_available():
            device = torch.device("cuda", local_rank)
        else:
            device = torch.device("cpu")
        return cls(rank=rank, local_rank=local_rank, world_size=world_size, device=device)


def init_process_group(proc: ProcessInfo) -> None:
    """Join the default process group (torchrun's env:// rendezvous) when running > 1 process."""
    if proc.device.type == "cuda":
        torch.cuda.set_device(proc.device)
    if proc.distributed and not dist.is_initialized():
        backend = "nccl" if proc.device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, rank=proc.rank, world_size=proc.world_size)


# the device mesh FSDP2 shards along (data_parallel_mesh); close_process_group releases it
_MESHES: list[Any] = []


def data_parallel_mesh(proc: ProcessInfo) -> Any:
    """The one 1-D device mesh over every rank of the default group (what ``fully_shard`` makes
    when given none), made once per process group so that :func:`close_process_group` can
    release it."""
    if not _MESHES:
        from torch.distributed.device_mesh import init_device_mesh

        _MESHES.append(init_device_mesh(proc.device.type, (proc.world_size,)))
    return _MESHES[0]


def close_process_group() -> None:
    """Destroy the process group so that it is really gone before the interpreter exits.

    DTensor keeps every device mesh it has seen in module-level caches (sharding propagation,
    redistribute plans, mesh topology), and a mesh holds its process groups. After a FSDP2
    run ``destroy_process_group()`` therefore left the gloo group alive, with its three native
    threads (``gloo_tcp_loop``, two ``pt_gloo_runloop``) still running while ``exit()`` ran the
    C++ static destructors; a gloo group alive at exit is how a process ends in "terminate
    called without an active exception" (SIGABRT; pytorch/pytorch#190489), which failed
    finished runs on rank 1. The finished model and optimizer also still hold the group
    (FSDP2's per-parameter mesh info) from reference cycles that only the garbage collector
    frees. So: empty the mesh's group registry, collect those cycles, then destroy: the group
    is freed and its threads joined here, while the interpreter is whole
    (``tests/unit/train/test_train_exit.py`` checks that no gloo thread is left)."""
    for mesh in _MESHES:
        registry = getattr(mesh, "_pg_registry", None)  # torch 2.13: name -> ProcessGroup
        if registry is not None:
            registry.clear()
    _MESHES.clear()
    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier(proc: ProcessInfo) -> None:
    if proc.distributed:
        dist.barrier()


def all_gather_objects(obj: Any, proc: ProcessInfo) -> list[Any]:
    """Every rank's ``obj`` (picklable, small), in rank order, on every rank (collective)."""
    if not proc.distributed:
        return [obj]
    gathered: list[Any] = [None] * proc.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_from_main(obj: Any, proc: ProcessInfo) -> Any:
    """Rank 0's ``obj`` on every rank (collective); the others pass anything, e.g. None."""
    if not proc.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def set_determinism(seed: int, deterministic: bool, proc: ProcessInfo) -> None:
    """Seed every RNG; in deterministic mode also forbid nondeterministic kernels."""
    random.seed(seed + proc.rank)
    np.random.seed((seed + proc.rank) % 2**32)
    torch.manual_seed(seed + proc.rank)
    if deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        if proc.device.type == "cuda":
            # cuBLAS needs a fixed workspace for reproducible matmuls; must precede the first call
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def rng_state(proc: ProcessInfo) -> dict[str, object]:
    """This rank's RNG states as tensors and plain Python data only, so a checkpoint's RNG file
    loads with ``torch.load(..., weights_only=True)`` (no pickled objects, no code execution
    from a checkpoint folder: README, "Trust model")."""
    algorithm, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    version, mt_state, gauss_next = random.getstate()
    state: dict[str, object] = {
        "python": {"version": version, "state": list(mt_state), "gauss_next": gauss_next},
        "numpy": {
            "algorithm": str(algorithm),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch": torch.get_rng_state(),
    }
    if proc.device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(proc.device)
    return state


def set_rng_state(state: dict[str, Any], proc: ProcessInfo) -> None:
    """Restore what :func:`rng_state` captured."""
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss_next"]))
    nps = state["numpy"]
    np.random.set_state(
        (
            nps["algorithm"],
            nps["keys"].numpy().astype(np.uint32),
            nps["pos"],
            nps["has_gauss"],
            nps["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and proc.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], proc.device)


class StopFlag:
    """Set by SIGTERM/SIGINT; the loop finishes the current step, all ranks agree, and it exits.

    ``install()`` replaces the handlers (main thread only); ``restore()`` puts the old ones back.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None
        # what signal.signal returned: None for a handler not installed from Python
        self._previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}

    @property
    def requested(self) -> bool:
        return self.signal_name is not None

    def request(self, signal_name: str) -> None:
        self.signal_name = self.signal_name or signal_name

    def install(self) -> StopFlag:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        self.request(signal.Signals(signum).name)


def agree_to_stop(stop: StopFlag, proc: ProcessInfo) -> bool:
    """True on every rank if any rank was asked to stop (a lone rank leaving would hang the rest)."""
    flag = torch.tensor([1.0 if stop.requested else 0.0], device=proc.device)
    if proc.distributed:
        dist.all_reduce(flag)
    return bool(flag.item() > 0)
