"""The library's small exception hierarchy: fail loudly and say how to fix it.

A write that the file system refuses for a reason no retry can fix (a full disk, a read-only
mount, no permission) becomes a :class:`StorageError` that names the path and what to do::

    with refusals_named(uri):
        ...  # OSError(ENOSPC) -> StorageError("cannot write <uri>: no space left on the ...")
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager


class PretrainError(Exception):
    """Base class for every error raised on purpose by the pretrain library."""


class ConfigError(PretrainError, ValueError):
    """A configuration value is invalid; the message says which field and how to fix it."""


class DataError(PretrainError):
    """Input data cannot be read or violates a data contract."""


class CheckpointError(PretrainError):
    """A checkpoint is missing, incomplete or does not match the run that loads it."""


class StorageError(PretrainError):
    """The artifact store refused a write (read-only, full, permission denied); the message
    names the path and what to do. Retrying cannot help until someone acts on it."""


_ANOTHER_ROOT = (
    "or choose another artifact root (--artifact-root or --root, PRETRAIN_ROOT, or the store "
    "resource's root)"
)
_DENIED = (
    "permission denied: let the user that runs the pipeline {action} it (chown, chmod) "
    + _ANOTHER_ROOT
)
# errno -> what it means for the artifact root and what to do about it ({action}: write, read)
REFUSALS: dict[int, str] = {
    errno.ENOSPC: (
        "no space left on the device: free space (or move the artifact root to a larger disk) "
        "and run again; outputs already complete are kept and the rerun does the rest"
    ),
    errno.EDQUOT: (
        "the disk quota is used up: free space or raise the quota, and run again; outputs "
        "already complete are kept and the rerun does the rest"
    ),
    errno.EROFS: f"the file system is read-only: mount it read-write {_ANOTHER_ROOT}",
    errno.EACCES: _DENIED,
    errno.EPERM: _DENIED,
}


@contextmanager
def refusals_named(uri: str, action: str = "write") -> Iterator[None]:
    """Turn an ``OSError`` of :data:`REFUSALS` raised in the block into a
    :class:`StorageError` naming ``uri`` (``action``: ``write`` or ``read``); any other
    ``OSError`` passes unchanged."""
    try:
        yield
    except OSError as exc:
        what = REFUSALS.get(exc.errno) if exc.errno is not None else None
        if what is None:
            raise
        raise StorageError(f"cannot {action} {uri}: {what.format(action=action)}") from exc
