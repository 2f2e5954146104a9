"""Global duplicate clusters from every shard's signatures: exact, URL and MinHash-LSH.

1. Candidates per band partition (:mod:`pretrain.dedup.buckets`): same normalized text, same
   URL, or a shared LSH band bucket — never one in-memory table of the whole corpus.
2. Verification (:mod:`pretrain.dedup.jaccard`): with ``verify="jaccard"`` an LSH pair counts
   only when the true shingle Jaccard of the two texts is ``>= threshold``, in slices of
   bounded memory.
3. Union-find over the nodes that have an edge (memory grows with duplicates, not corpus).
   The survivor of each cluster is the highest ``quality_score`` (null lowest), then the
   smallest ``id``; in incremental mode a document kept earlier always wins
   (:mod:`pretrain.dedup.incremental`). Shard URIs are sorted first, so the output does not
   depend on the order they are given in — reruns are byte-identical::

    from pretrain.dedup.clusters import cluster_duplicates
    stats = cluster_duplicates(signature_uris, ".pretrain/artifacts/dedup_clusters", DedupConfig())

Output folder: ``clusters.parquet`` (documents in clusters of size > 1: ``id, cluster_id,
survivor_id, reason, source, shard, row``; reason ``survivor``, ``exact_duplicate``,
``url_duplicate`` or ``near_duplicate``), ``containment.parquet`` (LSH candidates below the
Jaccard threshold whose smaller document shares ``>= containment_threshold`` of its shingles
with the other — a chapter re-posted from a book; listed, never removed),
``boilerplate.parquet`` (line dedup),
``changes.parquet`` and ``state.json`` (incremental), ``stats.json``.
"""

from __future__ import annotations

import hashlib
import json
import math
import resource
import time
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.dedup import lines
from pretrain.dedup.buckets import Candidates, ShardInput, candidate_pairs
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.incremental import (
    ROW_SCHEMA,
    Plan,
    Prior,
    load_prior,
    plan_incremental,
    survivor_changes,
)
from pretrain.dedup.jaccard import documents_uri, per_shard, read_rows, verify_pairs
from pretrain.dedup.stats import ClusterStats, source_rates
from pretrain.errors import DataError
from pretrain.identity import stale_inputs

INFO_COLUMNS = ["id", "source", "quality_score", "exact_hash", "url_hash"]


@dataclass(frozen=True)
class ClusterInputs:
    """Shards in node order, their fingerprints, and the incremental plan against the prior."""

    shards: list[ShardInput]
    fingerprints: dict[str, str]
    prior: Prior | None
    plan: Plan
    prior_dir: str  # the clustering output folder the prior was read from

    @classmethod
    def open(
        cls, signature_uris: list[str], output_dir_uri: str, config: DedupConfig
    ) -> ClusterInputs:
        shards, fingerprints = open_shards(signature_uris, config)
        prior = load_prior(output_dir_uri, config)
        plan = plan_incremental(shards, fingerprints, prior)
        return cls(shards, fingerprints, prior, plan, output_dir_uri)

    @property
    def masks(self) -> Plan | None:
        """The plan whose node masks restrict candidates (None on a first or full run)."""
        return self.plan if self.prior else None

    def sub_slices(self, config: DedupConfig) -> int:
        """Reads per hash slice so that one holds about ``max_partition_rows`` bucket rows."""
        documents = sum(s.num_rows for s in self.shards)
        return max(1, math.ceil(documents / (config.hash_slices * config.max_partition_rows)))

    def plan_token(self, config: DedupConfig) -> str:
        """Identity of what a band partition's pairs depend on (inputs, prior state, params):
        :mod:`pretrain.dedup.pairs` refuses pairs computed against other inputs."""
        prior = None
        if self.prior is not None:
            prior = [
                hashlib.sha256(storage.read_bytes(storage.join(self.prior_dir, name))).hexdigest()
                for name in ("state.json", "clusters.parquet")
            ]
        payload = {
            "shards": [
                [s.uri, s.offset, s.num_rows, self.fingerprints[s.uri]] for s in self.shards
            ],
            "prior": prior,
            "params": config.decision_params(),
            "slices": [config.hash_slices, self.sub_slices(config)],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def cluster_duplicates(
    signature_uris: list[str], output_dir_uri: str, config: DedupConfig
) -> ClusterStats:
    """Cluster duplicates across all signature files in one process (see above)."""
    started = time.monotonic()
    inputs = ClusterInputs.open(signature_uris, output_dir_uri, config)
    found, near, contained = find_pairs(inputs.shards, config, inputs.masks)
    return write_clusters(
        inputs, found.exact, near, output_dir_uri, config, candidate_pairs=len(found.lsh),
        partitions=found.partitions, peak_partition_rows=found.peak_partition_rows,
        started=started, contained=contained,
    )  # fmt: skip


def write_clusters(
    inputs: ClusterInputs,
    exact: np.ndarray,
    near: np.ndarray,
    output_dir_uri: str,
    config: DedupConfig,
    *,
    candidate_pairs: int,
    partitions: int,
    peak_partition_rows: int,
    started: float,
    contained: np.ndarray | None = None,
) -> ClusterStats:
    """Union of exact and verified near pairs, survivor choice, boilerplate; write the folder
    (``contained``: containment rows, see :func:`find_pairs`, listed, never removed).

    The components (and so the output) depend only on the set of pairs, not on their order.
    """
    contained = unique_containment(contained)
    shards, plan, prior = inputs.shards, inputs.plan, inputs.prior
    edges = np.concatenate([exact, near]).reshape(-1, 2)
    nodes, roots = _components(edges)
    info = _node_info(shards, nodes).with_columns(pl.Series("root", roots))
    new_rows = _assign_survivors(info, plan, incremental=prior is not None)
    rows = _finish_rows(pl.concat([plan.carried, new_rows]))
    changes = survivor_changes(prior, rows)

    removed_rows = _removed_rows(rows, shards)
    boilerplate = lines.boilerplate_hashes(
        [s.sibling("lines.parquet") for s in shards], removed_rows, config.lines,
        config.max_partition_rows,
    )  # fmt: skip
    stats = ClusterStats.from_rows(
        rows,
        documents=sum(s.num_rows for s in shards),
        repeated_ids=info.height - info["id"].n_unique(),
        candidate_pairs=candidate_pairs,
        verified_pairs=len(near),
        exact_pairs=len(exact),
        partitions=partitions,
        peak_partition_rows=peak_partition_rows,
        peak_rss_mb=peak_rss_mb(),
        committed_shards=len(plan.committed),
        fresh_shards=len(shards) - len(plan.committed) if prior else len(shards),
        survivor_changes=changes.height,
        boilerplate_units=boilerplate.num_rows,
        seconds=round(time.monotonic() - started, 3),
        normalization=config.normalization,
        containment_pairs=len(contained),
        rate_by_source=source_rates(rows, shards),
    )
    storage.write_table(rows.to_arrow(), storage.join(output_dir_uri, "clusters.parquet"))
    storage.write_table(boilerplate, storage.join(output_dir_uri, "boilerplate.parquet"))
    storage.write_table(changes.to_arrow(), storage.join(output_dir_uri, "changes.parquet"))
    storage.write_table(
        _containment_rows(shards, contained).to_arrow(),
        storage.join(output_dir_uri, "containment.parquet"),
    )
    repeated = repeated_copies(info, shards)
    storage.write_table(repeated, storage.join(output_dir_uri, "repeated.parquet"))
    storage.write_json(
        {
            **stats.as_metadata(),
            "repeated_copies": repeated.num_rows,  # removed as repeated_id unless a duplicate anyway
            "inputs": [s.uri for s in shards],
            "config": asdict(config),
        },
        storage.join(output_dir_uri, "stats.json"),
    )
    storage.write_json(
        {"shards": inputs.fingerprints, "params": config.decision_params()},
        storage.join(output_dir_uri, "state.json"),
    )
    return stats


REPEATED_SCHEMA = pa.schema(
    [("id", pa.string()), ("documents", pa.string()), ("row", pa.int64()),
     ("kept_documents", pa.string()), ("kept_row", pa.int64())]
)  # fmt: skip


def repeated_copies(info: pl.DataFrame, shards: list[ShardInput]) -> pa.Table:
    """The extra copies of ids that several rows hold (the same file in two shard groups).

    Clusters are keyed by id, so every copy of a kept id would survive in its own shard;
    here the first copy in (shard, row) order stays and the others are listed by documents
    file and row for :func:`pretrain.dedup.apply.apply_dedup` to remove as ``repeated_id``.
    """
    copies = info.filter(pl.col("id").is_duplicated()).sort("id", "shard", "row")
    if copies.is_empty():
        return REPEATED_SCHEMA.empty_table()
    documents = {uri: documents_uri(ShardInput(uri=uri, offset=0, num_rows=0))
                 for uri in copies["shard"].unique().to_list()}  # fmt: skip
    copies = copies.with_columns(
        documents=pl.col("shard").replace_strict(documents),
        kept_documents=pl.col("shard").first().over("id").replace_strict(documents),
        kept_row=pl.col("row").first().over("id"),
        rank=pl.int_range(pl.len()).over("id"),
    ).filter(pl.col("rank") > 0)
    return copies.select(REPEATED_SCHEMA.names).to_arrow().cast(REPEATED_SCHEMA)


def unique_containment(contained: np.ndarray | None) -> np.ndarray:
    """Containment rows once per (contained, container) pair, sorted (a pair can be a candidate
    in several bands)."""
    if contained is None or len(contained) == 0:
        return np.empty((0, 3), np.float64)
    order = np.lexsort((contained[:, 1], contained[:, 0]))
    rows = contained[order]
    keep = np.ones(len(rows), bool)
    keep[1:] = np.any(rows[1:, :2] != rows[:-1, :2], axis=1)
    return rows[keep]


def find_pairs(
    shards: list[ShardInput], config: DedupConfig, plan: Plan | None = None
) -> tuple[Candidates, np.ndarray, np.ndarray]:
    """Candidates over every band partition, the LSH pairs that pass verification, and the
    LSH pairs that fail it but whose smaller document is contained in the other
    (``(k, 3)`` float64 rows ``contained node, container node, containment``)."""
    found = candidate_pairs(
        shards,
        config,
        eligible=plan.eligible if plan else None,
        is_fresh=plan.is_fresh if plan else None,
    )
    near, contained = verify_pairs(found.lsh, shards, config)
    return found, near, contained


def open_shards(uris: list[str], config: DedupConfig) -> tuple[list[ShardInput], dict[str, str]]:
    """Check parameters from the Parquet footers only; number nodes in sorted URI order."""
    if not uris:
        raise DataError("no signature files given: materialize minhash_signatures first")
    expected = {f"dedup.{k}": v for k, v in config.signature_params().items()}
    shards, fingerprints, offset, stale = [], {}, 0, []
    for uri in sorted(set(uris)):
        if not storage.exists(uri):
            raise DataError(f"{uri} does not exist: materialize minhash_signatures for it")
        fs, path = storage.filesystem(uri)
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            num_rows = parquet.metadata.num_rows
            raw = parquet.schema_arrow.metadata or {}
        found = {k.decode(): v.decode() for k, v in raw.items()}
        wrong = {k: (found.get(k), v) for k, v in expected.items() if found.get(k) != v}
        if wrong:
            raise DataError(
                f"{uri} was computed with other dedup parameters {wrong} (found, expected): "
                "recompute its signatures with this DedupConfig"
            )
        documents, identity = (
            found.get("dedup.documents_uri"),
            found.get("dedup.documents_identity"),
        )
        if documents and identity and stale_inputs({documents: identity}):
            stale.append(f"{uri} (from {documents})")
        shards.append(ShardInput(uri=uri, offset=offset, num_rows=num_rows))
        fingerprints[uri] = found.get("dedup.fingerprint", "")
        offset += num_rows
    if stale:
        raise DataError(
            f"{len(stale)} signature file(s) were computed from an earlier version of their "
            f"documents: {'; '.join(stale)}; re-materialize minhash_signatures for those shards"
        )
    return shards, fingerprints


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` where Linux has it.

    ``ru_maxrss`` is not used there: it keeps the high-water mark of the image a subprocess
    was forked from, so a small child of a big parent reports the parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _node_info(shards: list[ShardInput], nodes: np.ndarray) -> pl.DataFrame:
    frames = []
    for shard, _, rows in per_shard(shards, nodes):
        for wanted, table in read_rows(shard.uri, rows, INFO_COLUMNS):
            frame = pl.from_arrow(table)
            assert isinstance(frame, pl.DataFrame)
            frames.append(frame.with_columns(shard=pl.lit(shard.uri), row=pl.Series(wanted)))
    schema = pl.Schema({"id": pl.String, "source": pl.String, "quality_score": pl.Float32,
                        "exact_hash": pl.UInt64, "url_hash": pl.UInt64, "shard": pl.String,
                        "row": pl.Int64})  # fmt: skip
    if not frames:
        return pl.DataFrame(schema=schema).with_columns(node=pl.Series([], dtype=pl.Int64))
    return pl.concat(frames).cast(schema).with_columns(node=pl.Series(nodes))


def _containment_rows(shards: list[ShardInput], contained: np.ndarray) -> pl.DataFrame:
    """``contained_id, container_id, containment`` (+ shard and row of the contained one)."""
    nodes = contained[:, :2].astype(np.int64)
    ids = _node_info(shards, np.unique(nodes)).select("node", "id", "shard", "row")
    pairs = pl.DataFrame(
        {"inner": nodes[:, 0], "outer": nodes[:, 1], "containment": contained[:, 2]},
        schema={"inner": pl.Int64, "outer": pl.Int64, "containment": pl.Float64},
    )
    return (
        pairs.join(ids.rename({"node": "inner", "id": "contained_id"}), on="inner")
        .join(
            ids.select(pl.col("node").alias("outer"), pl.col("id").alias("container_id")),
            on="outer",
        )  # fmt: skip
        .select("contained_id", "container_id", pl.col("containment").round(4), "shard", "row")
        .sort("contained_id", "container_id")
    )


def _components(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union-find over the nodes that have an edge → (sorted nodes, root of each)."""
    nodes = np.unique(edges)
    parent = np.arange(len(nodes))
    local = np.searchsorted(nodes, edges)
    for a, b in local.tolist():
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return nodes, np.array([_find(parent, n) for n in range(len(nodes))], dtype=np.int64)


def _find(parent: np.ndarray, node: int) -> int:
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return int(node)


def _assign_survivors(info: pl.DataFrame, plan: Plan, *, incremental: bool) -> pl.DataFrame:
    nodes = info["node"].to_numpy()
    anchor = plan.is_anchor(nodes) if incremental else np.zeros(len(nodes), bool)
    ranked = (
        info.with_columns(anchor=pl.Series(anchor))
        .sort(
            ["root", "anchor", "quality_score", "id"],
            descending=[False, True, True, False],
            nulls_last=True,
        )  # fmt: skip
        .unique("id", keep="first", maintain_order=True)  # one id listed by two shards
        .filter(pl.len().over("root") > 1)
        .with_columns(
            pl.col(c).first().over("root").alias(f"survivor_{c}")
            for c in ("id", "exact_hash", "url_hash")
        )
    )
    reason = (
        pl.when(pl.col("id") == pl.col("survivor_id"))
        .then(pl.lit("survivor"))
        .when(pl.col("exact_hash") == pl.col("survivor_exact_hash"))
        .then(pl.lit("exact_duplicate"))
        .when(pl.col("url_hash") == pl.col("survivor_url_hash"))
        .then(pl.lit("url_duplicate"))
        .otherwise(pl.lit("near_duplicate"))
    )
    # Anchors other than the survivor keep their earlier rows (or stay unlisted).
    return (
        ranked.with_columns(reason=reason, cluster_id=pl.lit(0, pl.Int64))
        .filter(~pl.col("anchor") | (pl.col("reason") == "survivor"))
        .select(list(ROW_SCHEMA))
        .cast(ROW_SCHEMA)
    )


def _finish_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per id; cluster ids numbered by sorted survivor id; stable row order."""
    rows = rows.unique("id", keep="first", maintain_order=True)
    order = rows.select("survivor_id").unique().sort("survivor_id").with_row_index("cid")
    return (
        rows.join(order, on="survivor_id")
        .with_columns(pl.col("cid").cast(pl.Int64).alias("cluster_id"))
        .select(list(ROW_SCHEMA))
        .sort("cluster_id", "id")
    )


def _removed_rows(rows: pl.DataFrame, shards: list[ShardInput]) -> list[np.ndarray]:
    removed = rows.filter(pl.col("reason") != "survivor")
    return [
        np.sort(removed.filter(pl.col("shard") == s.uri)["row"].to_numpy()).astype(np.int64)
        for s in shards
    ]
