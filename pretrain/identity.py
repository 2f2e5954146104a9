"""Output identity: a data output is named by its settings, its inputs and its code version.

As in Marin's executor and OLMo-core, an output's identity (``version``) is a hash of the
stage's effective config, the versions of the outputs it read and the stage's code version.
It is written next to the output (``_identity.json``, last, after the output is complete) and
is the Dagster data version of the asset, so staleness follows from it::

    from pretrain import identity
    ident = identity.compute("filtered_shards", "filter-v2", config, inputs=[raw_dir])
    identity.prepare_output(out_dir, ident, archive_root)   # refuses stale inputs, archives
    ...                                                     # the stage writes out_dir
    identity.write(out_dir, ident)

Two guarantees follow:

- **Stale inputs are refused.** Every input must carry an identity, and the inputs *it* was made
  from must still be current: signatures made from an older ``filtered_shards`` cannot feed dedup
  (``DataError`` naming the stale output and what to re-materialize).
- **An old output is never overwritten by a run with other settings.** When the existing output
  was made with another config or code version, it is moved whole to
  ``<archive_root>/<version>/`` first (new input data with the same settings is an update, as in
  incremental dedup, and replaces it in place).
A cheaper, per-file identity serves inputs that are plain files rather than stage outputs
(:func:`file_identity`: size + sha256 of the last 64 KiB; for Parquet that tail is the footer,
which changes whenever the rows do). Dedup records it for each shard its signatures were made
from and refuses signatures whose documents changed since::

    recorded = {documents_uri: identity.file_identity(documents_uri)}   # stored with the output
    identity.check_inputs(recorded, output="minhash_signatures[web-0003]")  # DataError if stale
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pretrain import storage
from pretrain.errors import DataError

IDENTITY_FILE = "_identity.json"


def _canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def config_hash(config: Any) -> str:
    """A stable hash of a config (dataclass, dict or scalar), independent of key order."""
    blob = json.dumps(_canonical(config), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class Identity:
    """``version`` = hash(stage, code version, config hash, every input's version)."""

    stage: str
    code_version: str
    config_hash: str
    inputs: dict[str, str] = field(default_factory=dict)  # input dir URI → its version
    version: str = ""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Identity:
        return cls(**json.loads(text))

    def same_settings(self, other: Identity) -> bool:
        return (self.stage, self.code_version, self.config_hash) == (
            other.stage,
            other.code_version,
            other.config_hash,
        )


def read(dir_uri: str) -> Identity | None:
    """The identity of the output in ``dir_uri``; None when it has none (never made, or a run
    was interrupted before it completed)."""
    uri = storage.join(dir_uri, IDENTITY_FILE)
    data = storage.read_json_if_any(uri)  # no exists first: one S3 request fewer
    if data is None:
        return None
    try:
        return Identity(**data)
    except TypeError as exc:  # not an object, or other fields
        raise DataError(f"{uri} is not an identity record ({exc}): re-materialize it") from exc


def write(dir_uri: str, ident: Identity) -> None:
    """Record ``ident`` as the identity of the (complete) output in ``dir_uri``."""
    storage.write_bytes(ident.to_json().encode(), storage.join(dir_uri, IDENTITY_FILE))


def current_inputs(input_dirs: list[str], look: Look | None = None) -> dict[str, str]:
    """Each input dir → its version, after checking it is fresh (see :func:`check_fresh`;
    ``look``: the identities read so far, and what need not be checked again)."""
    look = look or Look()
    versions: dict[str, str] = {}
    checked: set[str] = set()
    for uri in input_dirs:
        ident = look.read(uri)
        if ident is None:
            raise DataError(
                f"input {uri} has no identity record ({IDENTITY_FILE}): it was never completed "
                "or an earlier run was interrupted; re-materialize it first"
            )
        look._check(uri, ident, checked, transitive=True)
        versions[uri] = ident.version
    return versions


def check_fresh(uri: str, ident: Identity, _checked: set[str] | None = None) -> None:
    """Refuse an output whose inputs, or their inputs in turn, changed since it was made."""
    Look()._check(uri, ident, set() if _checked is None else _checked, transitive=True)


def is_current(uri: str) -> bool:
    """Whether the output at ``uri`` is complete (it has a readable identity) and none of the
    inputs it records, nor theirs in turn, changed since it was made (a record that cannot be
    read counts as not current)."""
    return Look().is_current(uri)


class Look:
    """One look at a store's identities: each ``_identity.json`` read at most once, and the
    inputs ``unchanged`` says have not changed since a look at which everything reading them
    was current taken as they were (not read at all). A sensor tick over thousands of outputs
    reads what changed, not the whole chain of every output::

        look = Look(unchanged=lambda uri: uri not in remade)  # remade: dirs written since
        look.is_current(pool_dir, transitive=False)           # reads the pool and its inputs
    """

    def __init__(self, unchanged: Callable[[str], bool] | None = None) -> None:
        self.unchanged = unchanged or (lambda uri: False)
        self._read: dict[str, Identity | None] = {}
        self.reads = 0  # identity files read (for the tests' and the bench's counts)

    def read(self, dir_uri: str) -> Identity | None:
        if dir_uri not in self._read:
            self._read[dir_uri] = read(dir_uri)
            self.reads += 1
        return self._read[dir_uri]

    def prefetch(self, dir_uris: Iterable[str]) -> None:
        """Read the identities of ``dir_uris`` not read yet, several at once
        (:func:`pretrain.storage.map_io`): a first look at 10,000 groups reads 20,000 of them,
        round trips on S3. One that cannot be read is left for :meth:`read` to raise where
        it is asked for."""
        todo = [u for u in dict.fromkeys(dir_uris) if u not in self._read]

        def attempt(uri: str) -> Identity | None | DataError:
            try:
                return read(uri)
            except DataError as exc:
                return exc

        for uri, found in zip(todo, storage.map_io(attempt, todo), strict=True):
            if not isinstance(found, DataError):
                self._read[uri] = found
                self.reads += 1

    def is_current(self, uri: str, *, transitive: bool = True) -> bool:
        """Like :func:`is_current`; ``transitive=False`` checks only the inputs ``uri``
        records (were they remade since?), not theirs in turn."""
        try:
            made = self.read(uri)
            if made is None:
                return False
            self._check(uri, made, set(), transitive)
        except DataError:
            return False
        return True

    def _check(self, uri: str, ident: Identity, checked: set[str], transitive: bool) -> None:
        for upstream, version in sorted(ident.inputs.items()):
            if upstream in checked or self.unchanged(upstream):
                continue
            now = self.read(upstream)
            if now is None or now.version != version:
                current = now.version if now else "missing"
                raise DataError(
                    f"{uri} ({ident.stage}) is stale: it was made from {upstream} version "
                    f"{version}, which is now {current}; re-materialize {ident.stage} first"
                )
            checked.add(upstream)
            if transitive:
                self._check(upstream, now, checked, transitive)


def compute(
    stage: str, code_version: str, config: Any, inputs: list[str], look: Look | None = None
) -> Identity:
    """The identity an output of ``stage`` will have (checks that ``inputs`` are fresh; a
    ``look`` shares reads between outputs and may leave out inputs they need not check)."""
    versions = current_inputs(inputs, look)
    ident = Identity(
        stage=stage, code_version=code_version, config_hash=config_hash(config), inputs=versions
    )
    payload = json.dumps(dataclasses.asdict(ident), sort_keys=True).encode()
    return dataclasses.replace(ident, version=hashlib.sha256(payload).hexdigest()[:16])


def prepare_output(dir_uri: str, ident: Identity, archive_root: str) -> str | None:
    """Before a stage writes ``dir_uri``: archive an output made with other settings (returns
    where it went) and drop the old identity record, so an interrupted run leaves an output
    without identity (refused downstream) rather than one with a wrong identity."""
    old = read(dir_uri)
    archived = None
    if old is not None and not old.same_settings(ident):
        archived = storage.join(archive_root, old.version)
        storage.move_dir(dir_uri, archived)
    elif old is not None:
        storage.remove(storage.join(dir_uri, IDENTITY_FILE))
    return archived


def adopt(dir_uri: str, stage: str) -> Identity:
    """Give an output made outside the pipeline (imported data, a hand-made fixture) an identity:
    a hash of its files' names and bytes, so stages downstream accept it and notice when it
    changes."""
    digest = hashlib.sha256()
    for uri in storage.list_files(dir_uri):
        if uri.endswith(IDENTITY_FILE):
            continue
        digest.update(uri[len(dir_uri) :].encode())
        digest.update(storage.read_bytes(uri))
    ident = Identity(stage=stage, code_version="adopted", config_hash=digest.hexdigest()[:16])
    payload = json.dumps(dataclasses.asdict(ident), sort_keys=True).encode()
    ident = dataclasses.replace(ident, version=hashlib.sha256(payload).hexdigest()[:16])
    write(dir_uri, ident)
    return ident


# File identity: inputs that are plain files (dedup's documents.parquet per shard).
TAIL_BYTES = 64 * 1024  # for Parquet: the footer


def file_identity(uri: str) -> str:
    """``<size>:<sha256 of the last 64 KiB>`` of ``uri`` (local or ``s3://``)."""
    fs, path = storage.filesystem(uri)
    try:
        with fs.open_input_file(path) as f:
            size = f.size()
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
    except FileNotFoundError as exc:
        raise DataError(f"{uri} does not exist: materialize it first") from exc
    return f"{size}:{hashlib.sha256(tail).hexdigest()}"


def stale_inputs(recorded: dict[str, str]) -> list[str]:
    """The input URIs whose identity now differs from ``recorded`` (or that are gone)."""
    stale = []
    for uri, identity in sorted(recorded.items()):
        try:
            current = file_identity(uri)
        except DataError:
            current = "absent"
        if current != identity:
            stale.append(uri)
    return stale


def check_inputs(recorded: dict[str, str], *, output: str, rebuild: str = "") -> None:
    """Raise DataError naming ``output`` and every input that changed after it was built."""
    stale = stale_inputs(recorded)
    if stale:
        raise DataError(
            f"{output} is stale: it was computed from an earlier version of "
            f"{', '.join(stale)}; {rebuild or 're-materialize it from the current inputs'}"
        )
