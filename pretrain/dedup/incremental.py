"""Incremental dedup: earlier decisions stay, new or changed shards are decided against them.

``dedup_clusters/state.json`` records each clustered shard's signature fingerprint and the
decision parameters. On the next run:

- a *committed* shard (same fingerprint, same parameters) keeps its rows of
  ``clusters.parquet``; its kept documents become *anchors* that always win against new
  documents, its removed documents stay removed and take no part in the new graph;
- a *fresh* shard (new, or re-materialized with other content) is clustered against the
  anchors and against the other fresh shards;
- a committed document whose survivor lived in a fresh shard is *reopened* (decided again);
- every document of an earlier shard whose outcome differs from before is written to
  ``changes.parquet`` (``id, shard, old_survivor_id, new_survivor_id``; null = kept) — a
  re-materialized shard never changes survivors elsewhere without a record.

Changed parameters make every shard fresh (a full run), still with the change record::

    prior = load_prior(".pretrain/artifacts/dedup_clusters", config)
    plan = plan_incremental(shards, fingerprints, prior)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pretrain import storage
from pretrain.dedup.buckets import ShardInput
from pretrain.dedup.config import DedupConfig

ROW_SCHEMA = pl.Schema(
    {
        "id": pl.String,
        "cluster_id": pl.Int64,
        "survivor_id": pl.String,
        "reason": pl.String,
        "source": pl.String,
        "shard": pl.String,
        "row": pl.Int64,
    }
)


@dataclass(frozen=True)
class Prior:
    fingerprints: dict[str, str]  # shard uri → fingerprint, only where parameters still match
    rows: pl.DataFrame  # the previous clusters.parquet
    shards: frozenset[str]  # every shard of the previous run (for the change record)


@dataclass(frozen=True)
class Plan:
    committed: frozenset[str]
    carried: pl.DataFrame  # rows of committed shards that stay as they are
    excluded: np.ndarray = field(repr=False)  # sorted nodes removed earlier (not in graph)
    reopened: np.ndarray = field(repr=False)  # sorted committed nodes decided again
    committed_ranges: np.ndarray = field(repr=False)  # (k, 2) node [start, end)

    def eligible(self, nodes: np.ndarray) -> np.ndarray:
        return ~np.isin(nodes, self.excluded)

    def is_fresh(self, nodes: np.ndarray) -> np.ndarray:
        return ~self.is_committed(nodes) | np.isin(nodes, self.reopened)

    def is_committed(self, nodes: np.ndarray) -> np.ndarray:
        inside = np.zeros(len(nodes), dtype=bool)
        for start, end in self.committed_ranges:
            inside |= (nodes >= start) & (nodes < end)
        return inside

    def is_anchor(self, nodes: np.ndarray) -> np.ndarray:
        return self.is_committed(nodes) & ~np.isin(nodes, self.reopened)


def empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema=ROW_SCHEMA)


def load_prior(output_dir_uri: str, config: DedupConfig) -> Prior | None:
    """The previous run's state, or None (first run, or incremental mode off)."""
    state_uri = storage.join(output_dir_uri, "state.json")
    if not config.incremental or not storage.exists(state_uri):
        return None
    state = storage.read_json(state_uri)
    rows = pl.from_arrow(storage.read_table(storage.join(output_dir_uri, "clusters.parquet")))
    assert isinstance(rows, pl.DataFrame)
    same_params = state.get("params") == config.decision_params()
    return Prior(
        fingerprints=dict(state["shards"]) if same_params else {},
        rows=rows.cast(ROW_SCHEMA),
        shards=frozenset(state["shards"]),
    )


def plan_incremental(
    shards: list[ShardInput], fingerprints: dict[str, str], prior: Prior | None
) -> Plan:
    """Split shards into committed and fresh; find carried, excluded and reopened nodes."""
    none = np.empty(0, np.int64)
    if prior is None:
        return Plan(frozenset(), empty_rows(), none, none, np.empty((0, 2), np.int64))
    committed = frozenset(
        s.uri for s in shards if prior.fingerprints.get(s.uri) == fingerprints[s.uri]
    )
    carried = prior.rows.filter(pl.col("shard").is_in(list(committed)))
    survivors = carried.filter(pl.col("reason") == "survivor")["id"]
    removed = carried.filter(pl.col("reason") != "survivor")
    lost = removed.filter(~pl.col("survivor_id").is_in(survivors.implode()))
    offsets = pl.DataFrame(
        {"shard": [s.uri for s in shards], "offset": [s.offset for s in shards]},
        schema={"shard": pl.String, "offset": pl.Int64},
    )

    def nodes(rows: pl.DataFrame) -> np.ndarray:
        joined = rows.join(offsets, on="shard").select(pl.col("row") + pl.col("offset"))
        return np.sort(joined.to_series().to_numpy().astype(np.int64))

    ranges = np.array(
        [[s.offset, s.offset + s.num_rows] for s in shards if s.uri in committed], np.int64
    ).reshape(-1, 2)
    return Plan(
        committed=committed,
        carried=carried.filter(~pl.col("id").is_in(lost["id"].implode())),
        excluded=nodes(removed.filter(~pl.col("id").is_in(lost["id"].implode()))),
        reopened=nodes(lost),
        committed_ranges=ranges,
    )


def survivor_changes(prior: Prior | None, rows: pl.DataFrame) -> pl.DataFrame:
    """Documents of earlier shards whose survivor (null = kept) differs from before."""
    schema = pl.Schema({"id": pl.String, "shard": pl.String, "old_survivor_id": pl.String,
                        "new_survivor_id": pl.String})  # fmt: skip
    if prior is None:
        return pl.DataFrame(schema=schema)

    def outcome(frame: pl.DataFrame, name: str) -> pl.DataFrame:
        return (
            frame.filter(pl.col("shard").is_in(list(prior.shards)))
            .select(
                "id",
                "shard",
                pl.when(pl.col("reason") == "survivor")
                .then(None)
                .otherwise(pl.col("survivor_id"))
                .alias(name),
            )
            .unique(["id", "shard"], keep="first")
        )

    old = outcome(prior.rows, "old_survivor_id")
    new = outcome(rows, "new_survivor_id")
    both = old.join(new, on=["id", "shard"], how="full", coalesce=True)
    changed = both.filter(
        pl.col("old_survivor_id").fill_null("") != pl.col("new_survivor_id").fill_null("")
    )
    return changed.select(list(schema)).cast(schema).sort("shard", "id")
