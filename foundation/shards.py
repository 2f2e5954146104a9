"""Register shard groups: plan manifests from a source, store them, add the partitions.

Used by the demo and by the shard-discovery sensor. A source is ``"embedded"`` (the text
already on this machine) or a local folder / ``s3://`` prefix of JSONL, Parquet or WARC.
"""

from __future__ import annotations

from dagster import DagsterInstance

from foundation.partitions import SHARD_PARTITIONS_NAME
from pretrain import storage
from pretrain.data.harvest import discover_embedded
from pretrain.data.raw import RawFile, ShardManifest, list_source_files, plan_shards
from pretrain.errors import ConfigError
from resources.storage import ArtifactStore


def plan_source(
    source: str,
    *,
    source_name: str = "web",
    max_shards: int = 4,
    files_per_shard: int | None = None,
    max_files_per_source: int | None = None,
) -> list[ShardManifest]:
    if source == "embedded":
        files = discover_embedded(max_files_per_source=max_files_per_source)
        prefix = "embedded"
    else:
        files = list_source_files(source, source_name)
        prefix = source_name
    return plan_shards(files, files_per_shard=files_per_shard, max_shards=max_shards, prefix=prefix)


def plan_sources(
    sources: list[tuple[str, str]], *, max_shards: int = 4, max_files_per_source: int | None = None
) -> list[ShardManifest]:
    """Shard groups of several ``(name, uri)`` sources (``--source`` and each ``--add-source``).

    A name given for several folders is one source holding the files of all of them, each file
    once (the same folder twice adds nothing): its shard keys ``<name>-0000``... would
    otherwise collide, and one folder's manifests overwrite the other's."""
    folders: dict[str, list[str]] = {}
    for name, uri in sources:
        if not name or not uri:
            raise ConfigError(f"source {name!r}={uri!r}: give --add-source as NAME=URI")
        if uri == "embedded" and name != "embedded":
            raise ConfigError(f"--add-source {name}=embedded: use --source embedded instead")
        if name == "embedded" and uri != "embedded":
            raise ConfigError(
                f"source name 'embedded' is the built-in corpus, not {uri}: choose another name"
            )
        folders.setdefault(name, []).append(uri)
    manifests: list[ShardManifest] = []
    for name, uris in folders.items():
        if uris[0] == "embedded":
            manifests += plan_source(
                "embedded", max_shards=max_shards, max_files_per_source=max_files_per_source
            )
            continue
        files: dict[str, RawFile] = {}
        for uri in uris:
            files.update((f.uri, f) for f in list_source_files(uri, name) if f.uri not in files)
        manifests += plan_shards(
            list(files.values()), files_per_shard=None, max_shards=max_shards, prefix=name
        )
    return manifests


def register_shards(
    instance: DagsterInstance, store: ArtifactStore, manifests: list[ShardManifest]
) -> list[str]:
    """Write each manifest, then add its key to the ``shards`` partitions; returns new keys."""
    keys = [m.key for m in manifests]
    if len(set(keys)) != len(keys):  # one manifest would overwrite the other: files lost
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ConfigError(f"shard keys {twice} planned twice: give each source its own name")
    existing = set(instance.get_dynamic_partitions(SHARD_PARTITIONS_NAME))
    for manifest in manifests:
        storage.write_bytes(manifest.to_json().encode(), store.manifest_uri(manifest.key))
    new_keys = [m.key for m in manifests if m.key not in existing]
    if new_keys:
        instance.add_dynamic_partitions(SHARD_PARTITIONS_NAME, new_keys)
    return [m.key for m in manifests]
