"""Reading a DCP checkpoint without running code from it.

``torch.distributed.checkpoint``'s ``FileSystemReader`` loads ``.metadata`` with plain
``pickle.load``: a checkpoint folder that someone else can write (a shared ``s3://`` prefix)
could run any code in the trainer, the eval or the export, and the commit record's checksums do
not help (whoever writes the files can rewrite the record too). :class:`SafeFileSystemReader`
unpickles ``.metadata`` with an allowlist: the metadata dataclasses DCP writes, ``torch.Size``,
dtypes, layouts and paths, nothing that can call a function of the attacker's choosing. The
tensor shards themselves are raw bytes (``torch.load(..., weights_only=True)`` for the rest)::

    dcp.load(state, storage_reader=SafeFileSystemReader(ckpt_dir), no_dist=True)
"""

from __future__ import annotations

import pathlib
import pickle
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import filesystem as dcp_filesystem
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from pretrain.errors import CheckpointError

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
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata
