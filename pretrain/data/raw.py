"""Raw shards: group input files into bounded shard manifests and write each as Parquet.

A shard group is a :class:`ShardManifest` (a key such as ``embedded-0000`` plus its files).
The Dagster layer stores manifests per partition key with ``to_json()``/``from_json()`` and
materializes each partition with :func:`build_raw_shard`::

    from pretrain.data.harvest import discover_embedded
    from pretrain.data.raw import build_raw_shard, plan_shards

    manifests = plan_shards(discover_embedded(), files_per_shard=None, max_shards=4,
                            prefix="embedded")
    stats = build_raw_shard(manifests[0], ".pretrain/artifacts/raw_shards/embedded-0000")
    stats.as_metadata()  # {"files": 290, "documents": 287, "rejected_undecodable": 1, ...}

Output folder: ``documents.parquet`` (DOCUMENT_SCHEMA; language and scores null; the input's
own id in ``source_id`` and its other fields in ``metadata``),
``rejects.parquet`` (REJECT_SCHEMA, stage ``raw``) and ``manifest.json`` (files + counts).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field

from pretrain import storage
from pretrain.data.extract import ExtractConfig
from pretrain.data.readers import RawFile, is_reject, iter_records, kind_for
from pretrain.data.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, doc_id
from pretrain.errors import ConfigError, DataError
from pretrain.hashset import HashSet64, key64
from pretrain.tmpfiles import sweep_stale_temps_in

STAGE = "raw"


@dataclass(frozen=True)
class ShardManifest:
    """A bounded group of raw files that becomes one partition (``key``)."""

    key: str
    files: tuple[RawFile, ...]

    def __post_init__(self) -> None:
        if not self.key or "/" in self.key:
            raise ConfigError(f"shard key {self.key!r}: use a non-empty name without '/'")
        object.__setattr__(self, "files", tuple(self.files))

    @property
    def sources(self) -> list[str]:
        return sorted({f.source for f in self.files})

    def to_json(self) -> str:
        return json.dumps(
            {"key": self.key, "files": [asdict(f) for f in self.files]}, sort_keys=True
        )

    @classmethod
    def from_json(cls, data: str) -> ShardManifest:
        obj = json.loads(data)
        return cls(key=obj["key"], files=tuple(RawFile(**f) for f in obj["files"]))


@dataclass(frozen=True, kw_only=True)
class RawShardStats:
    files: int
    documents: int
    chars: int
    rejected: dict[str, int] = field(default_factory=dict)
    documents_by_source: dict[str, int] = field(default_factory=dict)
    extract: dict[str, str | int | float | bool] = field(default_factory=dict)  # HTML settings

    @property
    def num_rejected(self) -> int:
        return sum(self.rejected.values())

    def as_metadata(self) -> dict[str, int | float | str]:
        out: dict[str, int | float | str] = {
            "files": self.files,
            "documents": self.documents,
            "chars": self.chars,
            "rejected": self.num_rejected,
        }
        out.update({f"rejected_{reason}": n for reason, n in sorted(self.rejected.items())})
        out.update({f"documents_{src}": n for src, n in sorted(self.documents_by_source.items())})
        out.update(self.extract)
        return out


def plan_shards(
    files: list[RawFile], *, files_per_shard: int | None, max_shards: int, prefix: str
) -> list[ShardManifest]:
    """Split ``files`` into shard groups keyed ``<prefix>-0000``, ``<prefix>-0001``, ...

    Files are striped round-robin over the shards (file ``i`` goes to shard ``i % n``) so every
    shard holds a similar mix of sources. ``files_per_shard=None`` makes
    ``min(max_shards, len(files))`` shards; otherwise ``ceil(len(files) / files_per_shard)``
    shards, which must not exceed ``max_shards``.
    """
    if max_shards < 1:
        raise ConfigError(f"max_shards={max_shards}: use at least 1")
    if files_per_shard is not None and files_per_shard < 1:
        raise ConfigError(f"files_per_shard={files_per_shard}: use at least 1, or None")
    if not prefix or "/" in prefix:
        raise ConfigError(f"prefix {prefix!r}: use a non-empty name without '/'")
    if not files:
        return []
    if files_per_shard is None:
        num_shards = min(max_shards, len(files))
    else:
        num_shards = math.ceil(len(files) / files_per_shard)
        if num_shards > max_shards:
            raise ConfigError(
                f"{len(files)} files at files_per_shard={files_per_shard} need {num_shards} "
                f"shards > max_shards={max_shards}: raise files_per_shard or max_shards"
            )
    groups: list[list[RawFile]] = [[] for _ in range(num_shards)]
    for i, raw in enumerate(files):
        groups[i % num_shards].append(raw)
    return [
        ShardManifest(key=f"{prefix}-{i:04d}", files=tuple(group)) for i, group in enumerate(groups)
    ]


def list_source_files(uri: str, source_name: str) -> list[RawFile]:
    """Every file (JSONL/Parquet/WARC/WET/text) under a local folder or ``s3://`` prefix.

    A single file URI is accepted too. Files no reader understands (``.csv``, ``.7z``) and
    hidden files (``.name``) are listed with kind ``unsupported``, so that each becomes one
    ``unsupported_format`` reject in its shard: counted, never skipped silently. A prefix
    with no readable file at all, or whose every readable file is empty (0 bytes), is a
    DataError: there is nothing to ingest, and the mixture would fail much later.
    """
    found = []
    for file_uri in storage.list_files(uri):
        name = file_uri.rsplit("/", 1)[-1]
        kind = None if name.startswith(".") else kind_for(file_uri)
        found.append(RawFile(uri=file_uri, source=source_name, kind=kind or "unsupported"))
    readable = [f for f in found if f.kind != "unsupported"]
    if not readable:
        raise DataError(
            f"no JSONL/Parquet/WARC/text files under {uri} for source {source_name!r}: "
            "check the path (and AWS_ENDPOINT_URL for s3://)"
        )
    if not any(_file_size(f.uri) for f in readable):  # stops at the first non-empty file
        raise DataError(
            f"every file under {uri} for source {source_name!r} is empty ({len(readable)} "
            "files of 0 bytes): nothing to ingest; check the export that wrote them"
        )
    return found


def _file_size(uri: str) -> int:
    fs, path = storage.filesystem(uri)
    return fs.get_file_info(path).size or 0


def require_documents(raw_shard_uris: list[str]) -> dict[str, int]:
    """Documents per source over the ``manifest.json`` of these raw shards; a source that
    gave none (every record rejected at ingest) is a DataError naming it and its rejects.

    Run after ingest: an empty source would otherwise fail minutes later, in the mixture."""
    documents: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    files: Counter[str] = Counter()
    where: dict[str, str] = {}
    for shard_uri in raw_shard_uris:
        manifest = storage.read_json(storage.join(shard_uri, "manifest.json"))
        for entry in manifest["files"]:
            documents[entry["source"]] += entry["documents"]
            rejected[entry["source"]] += entry["rejected"]
            files[entry["source"]] += 1
            where.setdefault(entry["source"], shard_uri)
    empty = sorted(source for source in files if documents[source] == 0)
    if empty:
        source = empty[0]
        raise DataError(
            f"source {source!r} gave 0 documents from {files[source]} files "
            f"({rejected[source]} records rejected at ingest): nothing to filter or train on; "
            f"see {storage.join(where[source], 'rejects.parquet')} for the reasons"
        )
    return dict(sorted(documents.items()))


def build_raw_shard(
    manifest: ShardManifest,
    output_dir_uri: str,
    *,
    max_docs: int | None = None,
    extract: ExtractConfig | None = None,
) -> RawShardStats:
    """Read every file of ``manifest`` into documents.parquet + rejects.parquet + manifest.json.

    Records stream from the readers into both tables in bounded row groups
    (:class:`pretrain.storage.StreamingTableWriter`: 4096 rows or ~4 MiB of text), so memory
    does not grow with the shard beyond 8 bytes per document (the duplicate-id check,
    :class:`pretrain.hashset.HashSet64`). Each table appears atomically (temporary name, then rename) and only after every
    file was read; manifest.json is written last. ``max_docs`` stops reading once that many
    documents are kept (debug runs); the count of documents not read is not known and is not
    reported as rejected. HTML pages (WARC responses) go through ``extract`` (default
    ``ExtractConfig()``); its settings are part of the stats' metadata.
    """
    extract = extract or ExtractConfig()
    if max_docs is not None and max_docs < 1:
        raise ConfigError(f"max_docs={max_docs}: use at least 1, or None for all")
    sweep_stale_temps_in(output_dir_uri)  # leftovers of a run that was killed
    tally = _Tally(max_docs=max_docs)
    per_file: list[dict] = []
    with (
        storage.StreamingTableWriter(
            storage.join(output_dir_uri, "documents.parquet"), DOCUMENT_SCHEMA
        ) as docs_out,
        storage.StreamingTableWriter(
            storage.join(output_dir_uri, "rejects.parquet"), REJECT_SCHEMA
        ) as rejects_out,
    ):
        for raw in manifest.files:
            if tally.full:
                break
            per_file.append(tally.read_file(raw, extract, docs_out, rejects_out))
        # Write the last row groups inside the block: a failure there must stop both tables
        # from being committed (else rejects.parquet alone would appear).
        docs_out.flush()
        rejects_out.flush()
    stats = RawShardStats(
        files=len(manifest.files),
        documents=tally.documents,
        chars=tally.chars,
        rejected=dict(sorted(tally.rejected.items())),
        documents_by_source=dict(sorted(tally.by_source.items())),
        extract=extract.as_metadata(),
    )
    storage.write_json(
        {
            "key": manifest.key,
            "files": per_file,
            "files_not_read": [f.uri for f in manifest.files[len(per_file) :]],
            "max_docs": max_docs,
            "stats": stats.as_metadata(),
        },
        storage.join(output_dir_uri, "manifest.json"),
    )
    return stats


@dataclass
class _Tally:
    """What a raw shard has kept and rejected so far (ids kept: 8 bytes each)."""

    max_docs: int | None
    documents: int = 0
    chars: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    by_source: Counter[str] = field(default_factory=Counter)
    seen: HashSet64 = field(default_factory=HashSet64)

    @property
    def full(self) -> bool:
        return self.max_docs is not None and self.documents >= self.max_docs

    def read_file(
        self,
        raw: RawFile,
        extract: ExtractConfig,
        docs_out: storage.StreamingTableWriter,
        rejects_out: storage.StreamingTableWriter,
    ) -> dict:
        """Stream one file's records into the two tables; its line of manifest.json."""
        kept_before, rejected_before = self.documents, rejects_out.rows
        for record in iter_records(raw, extract):
            if self.full:
                break
            if is_reject(record):
                reject = _reject_row({**record, "stage": STAGE})
                self.rejected[reject["reason"]] += 1
                rejects_out.write_rows([reject])
                continue
            text = record["text"]
            row = {"text": text, "source": record["source"], "url": record["url"],
                   "source_id": record.get("source_id"), "metadata": record.get("metadata")}  # fmt: skip
            row["id"] = doc_id(text, row["source"], row["url"])
            row["num_chars"] = len(text)
            if not self.seen.add(key64(bytes.fromhex(row["id"]))):  # same source, url, text
                self.rejected["duplicate_id"] += 1
                rejects_out.write_rows(
                    [{**row, "stage": STAGE, "reason": "duplicate_id", "detail": row["id"]}]
                )
                continue
            docs_out.write_rows([row])
            self.documents += 1
            self.chars += row["num_chars"]
            self.by_source[row["source"]] += 1
        return {"uri": raw.uri, "source": raw.source, "kind": raw.kind,
                "documents": self.documents - kept_before,
                "rejected": rejects_out.rows - rejected_before}  # fmt: skip


def _reject_row(reject: dict) -> dict:
    """Fill a reject's ``num_chars`` (null without text) and ``id`` (content hash if absent)."""
    text = reject.get("text")
    reject["num_chars"] = len(text) if isinstance(text, str) else None
    reject["id"] = reject.get("id") or doc_id(text or "", reject["source"], reject["url"])
    return reject
