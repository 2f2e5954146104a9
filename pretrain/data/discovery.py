"""New-shard discovery: group files that no manifest holds yet into new shard groups.

Pure planning for the discovery sensor. Keys continue the source's numbering
(``web-0007`` after ``web-0006``), and a file already in some manifest is never planned
twice, so a sensor tick that is replayed plans nothing new.

    manifests = plan_new_shards(files, registered_uris={...}, existing_keys=[...],
                                prefix="web", files_per_shard=64)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pretrain import storage
from pretrain.data.raw import RawFile, ShardManifest
from pretrain.errors import ConfigError, DataError


def next_index(existing_keys: list[str], prefix: str) -> int:
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)$")
    numbers = [int(m.group(1)) for k in existing_keys if (m := pattern.match(k))]
    return max(numbers, default=-1) + 1


def plan_new_shards(
    files: list[RawFile],
    *,
    registered_uris: Container[str],
    existing_keys: list[str],
    prefix: str,
    files_per_shard: int,
    max_new_shards: int = 100,
) -> list[ShardManifest]:
    """Manifests for the files not registered yet, in sorted order, ``files_per_shard`` each.

    A trailing group smaller than ``files_per_shard`` waits for more files (a crawl still
    being written would otherwise produce many tiny shards) unless it is the only work.
    """
    if files_per_shard < 1:
        raise ConfigError(f"files_per_shard={files_per_shard}: use at least 1, e.g. 64")
    fresh = sorted((f for f in files if f.uri not in registered_uris), key=lambda f: f.uri)
    groups = [fresh[i : i + files_per_shard] for i in range(0, len(fresh), files_per_shard)]
    if len(groups) > 1 and len(groups[-1]) < files_per_shard:
        groups.pop()
    start = next_index(existing_keys, prefix)
    return [
        ShardManifest(key=f"{prefix}-{start + i:04d}", files=tuple(group))
        for i, group in enumerate(groups[:max_new_shards])
    ]


# -- the files registered so far, without reading every manifest ------------------------------

INDEX_FILE = "_registered.json"


def _uri_key(uri: str) -> int:
    return int.from_bytes(hashlib.blake2b(uri.encode(), digest_size=8).digest(), "little")


class RegisteredFiles:
    """The raw files some manifest holds, as 64-bit hashes of their URIs (8 bytes a file), and
    the shard keys of those manifests: ``uri in registered`` asks whether a file is held.

    Kept as one index file next to the manifests (``manifests/_registered.json``), so a look
    for new files reads the index and only the manifests it does not cover yet (written by
    another path: ``pretrain data``, the demo), not every manifest of the campaign::

        registered = RegisteredFiles.load(manifests_uri)   # 1 read + the uncovered manifests
        new = plan_new_shards(files, registered_uris=registered, existing_keys=registered.keys, ...)
        registered.add(new); registered.save(manifests_uri)
    """

    def __init__(self, keys: list[str] | None = None, hashes: np.ndarray | None = None) -> None:
        self.keys: list[str] = list(keys or [])
        self._hashes = np.unique(hashes) if hashes is not None else np.empty(0, np.uint64)

    def __contains__(self, uri: object) -> bool:
        if not isinstance(uri, str):
            return False
        key = np.uint64(_uri_key(uri))
        i = int(np.searchsorted(self._hashes, key))
        return i < len(self._hashes) and self._hashes[i] == key

    def __len__(self) -> int:
        return len(self._hashes)

    def add(self, manifests: list[ShardManifest]) -> None:
        new = np.array([_uri_key(f.uri) for m in manifests for f in m.files], dtype=np.uint64)
        self._hashes = np.unique(np.concatenate([self._hashes, new]))
        self.keys += [m.key for m in manifests if m.key not in set(self.keys)]

    @classmethod
    def load(cls, manifests_uri: str) -> RegisteredFiles:
        """The index, brought up to date with the manifests it does not cover (a missing or
        unreadable index: rebuilt from every manifest)."""
        index_uri = storage.join(manifests_uri, INDEX_FILE)
        found = cls()
        if storage.exists(index_uri):
            try:
                data = storage.read_json(index_uri)
                hashes = np.frombuffer(base64.b64decode(data["files"]), dtype=np.uint64)
                found = cls(keys=list(data["keys"]), hashes=hashes)
            except (DataError, KeyError, TypeError, ValueError):
                found = cls()  # rebuilt below
        covered = set(found.keys)
        listed = [u for u in storage.list_files(manifests_uri, (".json",)) if u != index_uri]
        missing = [u for u in listed if storage.basename(u)[: -len(".json")] not in covered]
        found.add([ShardManifest.from_json(storage.read_bytes(u).decode()) for u in missing])
        return found

    def save(self, manifests_uri: str) -> None:
        data = {"keys": self.keys, "files": base64.b64encode(self._hashes.tobytes()).decode()}
        storage.write_json(data, storage.join(manifests_uri, INDEX_FILE))


def listing_digest(files: list[RawFile]) -> str:
    """Names a source's listing: the same files, the same digest (a sensor's idle check)."""
    return hashlib.sha256("\n".join(sorted(f.uri for f in files)).encode()).hexdigest()


# -- an idle look at a local source without listing its files ---------------------------------

STAMP_SETTLE_NS = 2 * 10**9  # a folder changed this recently is listed again next time


@dataclass(frozen=True)
class FolderStamp:
    """The modification times of a local source's folders: a folder's time moves when an entry
    is added to it, removed or renamed, so the same stamp means the same file names, and an
    idle look costs one ``stat`` per folder instead of a listing of every file (a crawl of
    90,000 files in a few folders). ``s3://`` has no folder times: there an idle look asks
    for an object after the last one listed (:func:`unchanged_since`).

        stamp = FolderStamp.take("/data/crawl")   # None on s3://
        ...list, plan, register...
        if stamp is not None and stamp.same():    # later: nothing new, nothing to list
            ...
    """

    folders: dict[str, int]  # folder -> st_mtime_ns

    @classmethod
    def take(cls, uri: str) -> FolderStamp | None:
        """The stamp of every folder under ``uri`` (symbolic links followed, each real folder
        once); None for ``s3://``, a single file, or a folder changed in the last
        ``STAMP_SETTLE_NS`` (a coarse clock could hide a file written in the same tick)."""
        root = Path(uri)
        if storage.is_s3(uri) or not root.is_dir():
            return None
        folders: dict[str, int] = {}
        seen: set[tuple[int, int]] = set()
        for path, subfolders, _ in os.walk(root, followlinks=True):
            st = os.stat(path)
            if (st.st_dev, st.st_ino) in seen:  # a link back up (``ln -s . loop``): once
                subfolders[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            folders[path] = st.st_mtime_ns
        if max(folders.values()) > time.time_ns() - STAMP_SETTLE_NS:
            return None
        return cls(folders)

    def same(self) -> bool:
        """Whether every folder is still there with the time it had."""
        for path, mtime in self.folders.items():
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    return False
            except OSError:
                return False
        return True

    def to_json(self) -> dict[str, int]:
        return dict(self.folders)


S3_FULL_LISTING_S = 3600.0  # an s3:// source is listed whole at least this often


def unchanged_since(cursor: str | None, uri: str) -> bool:
    """Whether a discovery cursor (:func:`discovery_cursor`) says that nothing has arrived at
    ``uri``, so nothing needs listing: a local source's folders are as they were; an ``s3://``
    source holds no object after the last one listed (one request), and was listed whole
    less than ``S3_FULL_LISTING_S`` ago (a new file whose name sorts before the last one is
    found by that whole listing)."""
    if not cursor or not cursor.startswith("{"):
        return False  # none yet, or a digest alone (an older cursor)
    seen = json.loads(cursor)
    if seen.get("uri") != uri:
        return False
    if seen.get("folders"):
        return FolderStamp(seen["folders"]).same()
    last, listed_at = seen.get("last"), seen.get("listed_at")
    if not (storage.is_s3(uri) and last and listed_at is not None):
        return False
    if time.time() - listed_at >= S3_FULL_LISTING_S:
        return False
    return not storage.has_key_after(uri, last)


def discovery_cursor(digest: str, stamp: FolderStamp | None, uri: str, files: list[RawFile]) -> str:
    """The cursor of a look at ``uri``: the listing's digest and, for a local source, its
    folders' stamp taken before the listing (a file that arrived during it moves the stamp);
    for an ``s3://`` source the last file listed and when."""
    found: dict[str, Any] = {"uri": uri, "digest": digest, "folders": stamp and stamp.to_json()}
    if storage.is_s3(uri) and files:
        found.update(last=max(f.uri for f in files), listed_at=time.time())
    return json.dumps(found)


def cursor_digest(cursor: str | None) -> str | None:
    """The listing digest a cursor holds (an older cursor is the digest itself)."""
    if not cursor or not cursor.startswith("{"):
        return cursor
    return json.loads(cursor).get("digest")
