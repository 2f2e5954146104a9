"""Reading a DCP checkpoint without running code from it.

``torch.distributed.checkpoint`` unpickles in two places, and a checkpoint folder that someone
else can write (a shared ``s3://`` prefix) could run any code in the trainer, the eval or the
export through either; the commit record's checksums do not help (whoever writes the files can
rewrite the record too):

- ``FileSystemReader`` loads ``.metadata`` with plain ``pickle.load``. :class:`SafeFileSystemReader`
  unpickles it with an allowlist: the metadata dataclasses DCP writes, ``torch.Size``, dtypes,
  layouts and paths, nothing that can call a function of the attacker's choosing. It also refuses
  entries that point outside the checkpoint's own ``__<rank>_<n>.distcp`` files.
- ``DefaultLoadPlanner.load_bytes`` loads every non-tensor entry (the optimizer's
  ``optim.param_groups.*``: learning rate, betas, ...) with ``torch.load(weights_only=False)``.
  :class:`SafeLoadPlanner` loads them with ``weights_only=True``: plain data and tensors only.

Tensor entries already load with ``weights_only=True`` inside DCP. :func:`load_state` is the one
way the project loads a DCP checkpoint (trainer resume, eval, export, quarantine scoring, the
Hugging Face export), and a refusal is a :class:`~pretrain.errors.CheckpointError` naming the
file::

    load_state({"model": model.state_dict()}, ckpt_dir, no_dist=True)
"""

from __future__ import annotations

import io
import pathlib
import pickle
import re
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint import filesystem as dcp_filesystem
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import ReadItem

from pretrain.errors import CheckpointError

_SHARD_FILE = re.compile(r"^__\d+_\d+\.distcp$")  # what DCP's FileSystemWriter names its files

_ALLOWED: dict[tuple[str, str], Any] = {
    **{
        ("torch.distributed.checkpoint.metadata", name): getattr(dcp_metadata, name)
        for name in (
            "Metadata",
            "MetadataIndex",
            "ChunkStorageMetadata",
            "TensorStorageMetadata",
            "BytesStorageMetadata",
            "TensorProperties",
            "StorageMeta",
            "_MEM_FORMAT_ENCODING",
        )
    },
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): dcp_filesystem._StorageInfo,
    ("torch", "Size"): torch.Size,
    ("torch.serialization", "_get_layout"): torch.serialization._get_layout,
    ("pathlib", "PosixPath"): pathlib.PosixPath,
    ("pathlib", "PurePosixPath"): pathlib.PurePosixPath,
    ("collections", "OrderedDict"): __import__("collections").OrderedDict,
}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise CheckpointError(
            f"DCP .metadata refers to {module}.{name}, which a checkpoint never needs; refusing "
            "to unpickle it (it could run code): the folder was tampered with or written by an "
            "unknown tool"
        )


class SafeFileSystemReader(FileSystemReader):
    """``FileSystemReader`` whose ``.metadata`` unpickling allows only DCP's own types."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as metadata_file:
            metadata = _MetadataUnpickler(metadata_file).load()
        if not isinstance(metadata, Metadata):
            raise CheckpointError(f"{path} does not hold DCP metadata")
        for index, info in (getattr(metadata, "storage_data", None) or {}).items():
            name = getattr(info, "relative_path", None)
            if not isinstance(name, str) or not _SHARD_FILE.match(name):
                raise CheckpointError(
                    f"{path}: entry {getattr(index, 'fqn', index)!r} points at {name!r}, not at "
                    "one of the checkpoint's own __<rank>_<n>.distcp files; refusing to read it "
                    "(the folder was tampered with or written by an unknown tool)"
                )
        storage_meta = getattr(metadata, "storage_meta", None)
        if storage_meta is None:
            storage_meta = metadata.storage_meta = StorageMeta()
        storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """``DefaultLoadPlanner`` whose non-tensor entries load with ``weights_only=True``.

    DCP stores each non-tensor value of a state dict (an optimizer's ``param_groups``) as a
    ``torch.save`` blob and loads it back with ``weights_only=False``: a blob holding an object
    whose ``__reduce__`` calls ``os.system`` would run it. Here such a blob is refused with a
    :class:`CheckpointError` naming the file and the entry."""

    def __init__(self, checkpoint_dir: str) -> None:
        super().__init__()
        self.checkpoint_dir = checkpoint_dir

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        try:
            loaded = torch.load(value, weights_only=True)
        except Exception as exc:  # UnpicklingError: "...unsupported GLOBAL posix.system..."
            info = (self.metadata.storage_data if self.metadata else {}).get(
                read_item.storage_index
            )
            name = getattr(info, "relative_path", "a .distcp file")
            lines = [line.strip() for line in str(exc).splitlines()]
            why = next((line for line in lines if "GLOBAL" in line), type(exc).__name__)
            raise CheckpointError(
                f"{self.checkpoint_dir}/{name}: entry {fqn!r} holds more than tensors and plain "
                f"data ({why.rstrip('.')}); refusing to load it (it could run code). The checkpoint "
                "was tampered with or written by an unknown tool: use another checkpoint (to train: "
                "run.resume=<dir>) and check who can write the run root"
            ) from exc
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[fqn], loaded)
        else:
            self.state_dict[fqn] = loaded


def load_state(state: dict[str, Any], checkpoint_dir: str, *, no_dist: bool) -> None:
    """``dcp.load`` of ``state`` (in place) from a local checkpoint folder with nothing
    unpickled beyond plain data and tensors. Collective unless ``no_dist``. Our refusals surface
    as themselves, not wrapped in DCP's ``CheckpointException`` (which is a ``BaseException``)."""
    reader = SafeFileSystemReader(checkpoint_dir)
    reader.read_metadata()  # a refused .metadata surfaces here, before any collective
    try:
        dcp.load(
            state,
            storage_reader=reader,
            planner=SafeLoadPlanner(checkpoint_dir),
            no_dist=no_dist,
        )
    except CheckpointException as exc:
        failures = [failure for failure, _trace in exc.failures.values()]
        ours = [f for f in failures if isinstance(f, CheckpointError)]
        if ours:
            raise ours[0] from exc
        first = failures[0] if failures else exc
        raise CheckpointError(
            f"cannot load {checkpoint_dir}: {type(first).__name__}: {first}"
        ) from exc
