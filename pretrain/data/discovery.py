"""New-shard discovery: group files that no manifest holds yet into new shard groups.

Pure planning for the discovery sensor. Keys continue the source's numbering
(``web-0007`` after ``web-0006``), and a file already in some manifest is never planned
twice, so a sensor tick that is replayed plans nothing new.

    manifests = plan_new_shards(files, registered_uris={...}, existing_keys=[...],
                                prefix="web", files_per_shard=64)
"""

from __future__ import annotations

import re

from pretrain.data.raw import RawFile, ShardManifest
from pretrain.errors import ConfigError


def next_index(existing_keys: list[str], prefix: str) -> int:
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)$")
    numbers = [int(m.group(1)) for k in existing_keys if (m := pattern.match(k))]
    return max(numbers, default=-1) + 1


def plan_new_shards(
    files: list[RawFile],
    *,
    registered_uris: set[str],
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
