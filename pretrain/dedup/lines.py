"""Line/paragraph-level dedup: boilerplate repeated across many documents is cut out.

Three steps that ride along the document-level ones (no extra asset):

1. per shard, with the signatures: :func:`line_rows` hashes every distinct stripped line (or
   paragraph) of each document → ``lines.parquet`` ``(h, row)``;
2. globally, with the clusters: :func:`boilerplate_hashes` counts, per hash partition, the
   documents that survive document-level dedup and contain each line; lines in at least
   ``min_documents`` of them are boilerplate → ``boilerplate.parquet``;
3. per shard, with apply: :func:`remove_boilerplate` drops those lines from each text.

    from pretrain.dedup.config import LineDedupConfig
    from pretrain.dedup.lines import remove_boilerplate, unit_hashes
    config = LineDedupConfig(min_documents=2)
    bad = unit_hashes(["- home"], config)
    remove_boilerplate(pa.array(["- home\\nreal text\\n"]), pa.array(["web"]), bad, config)
    # → (["real text\\n"], [1])

Lines shorter than ``min_chars`` and documents of ``skip_sources`` are never touched. Texts
without a removed line come back byte-identical.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.dedup.config import LineDedupConfig
from pretrain.errors import DataError

_SEED = 0x11E5
LINES_SCHEMA = pa.schema([("h", pa.uint64()), ("row", pa.uint32())])


def _separator(config: LineDedupConfig) -> str:
    return "\n" if config.unit == "line" else "\n\n"


def _units(
    texts: pa.Array | pa.ChunkedArray, sources: pa.Array, config: LineDedupConfig
) -> pl.DataFrame:
    """Exploded ``(doc, unit, h, eligible)`` frame for every text not in ``skip_sources``."""
    text = pl.Series("text", texts).cast(pl.String).fill_null("")
    if config.unit == "paragraph":
        text = text.str.replace_all(r"\n[ \t\r]*\n\s*", "\n\n")
    skip = pl.Series("source", sources).cast(pl.String).is_in(list(config.skip_sources))
    frame = pl.DataFrame({"doc": np.arange(len(text), dtype=np.int64), "text": text})
    units = (
        frame.filter(~skip.fill_null(False))
        .select("doc", pl.col("text").str.split(_separator(config), literal=True).alias("unit"))
        .explode("unit")
        .with_columns(pl.col("unit").str.strip_chars().alias("key"))
    )
    return units.with_columns(
        pl.col("key").hash(seed=_SEED).alias("h"),
        (pl.col("key").str.len_chars() >= config.min_chars).alias("eligible"),
    ).drop("key")


def unit_hashes(units: list[str], config: LineDedupConfig) -> np.ndarray:
    """uint64 keys of the given lines/paragraphs (as :func:`line_rows` would hash them)."""
    keys = pl.Series("u", units, pl.String).str.strip_chars()
    return keys.hash(seed=_SEED).to_numpy().astype(np.uint64)


def line_rows(
    texts: pa.Array | pa.ChunkedArray, sources: pa.Array, config: LineDedupConfig, offset: int
) -> pa.Table:
    """Distinct ``(h, row)`` for each document of the batch (``row`` = offset + position)."""
    units = _units(texts, sources, config).filter(pl.col("eligible"))
    pairs = units.select(
        pl.col("h").cast(pl.UInt64), (pl.col("doc") + offset).cast(pl.UInt32).alias("row")
    ).unique()
    return pairs.to_arrow().cast(LINES_SCHEMA)


def rows_table(parts: list[pa.Table], config: LineDedupConfig) -> pa.Table:
    """One shard's line rows sorted by ``(h, row)``, with the unit settings as metadata."""
    table = pa.concat_tables(parts) if parts else LINES_SCHEMA.empty_table()
    table = table.sort_by([("h", "ascending"), ("row", "ascending")])
    return table.replace_schema_metadata(_params(config))


def _params(config: LineDedupConfig) -> dict[str, str]:
    return {
        "lines.unit": config.unit,
        "lines.min_chars": str(config.min_chars),
        "lines.skip_sources": ",".join(config.skip_sources),
    }


def boilerplate_hashes(
    line_uris: list[str],
    removed_rows: list[np.ndarray],
    config: LineDedupConfig,
    max_partition_rows: int,
) -> pa.Table:
    """``(h, docs)`` of units found in ``>= min_documents`` surviving documents.

    Hash partitions keep memory at ``max_partition_rows`` rows, whatever the corpus size.
    """
    params = _params(config)  # what every lines file must have been cut with
    empty = pa.table({"h": pa.array([], pa.uint64()), "docs": pa.array([], pa.uint32())})
    if not config.enabled:
        return empty.replace_schema_metadata(params)
    total = 0
    for uri in line_uris:
        fs, path = storage.filesystem(uri)
        with fs.open_input_file(path) as f:
            found = pq.ParquetFile(f)
            metadata = {
                k.decode(): v.decode() for k, v in (found.schema_arrow.metadata or {}).items()
            }
            total += found.metadata.num_rows
        if metadata != params:
            raise DataError(
                f"{uri} was cut with other line settings {metadata}: recompute the signatures "
                "of that shard with this LineDedupConfig"
            )
    parts = max(1, math.ceil(total / max_partition_rows))
    found_parts = []
    for part in range(parts):
        frames = []
        for uri, removed in zip(line_uris, removed_rows, strict=True):
            fs, path = storage.filesystem(uri)
            table = pq.read_table(path, filesystem=fs, filters=hash_range_filter(part, parts))
            keep = ~np.isin(table.column("row").to_numpy(), removed)
            frame = pl.from_arrow(table.filter(pa.array(keep)))
            assert isinstance(frame, pl.DataFrame)  # a Table always converts to a DataFrame
            frames.append(frame.select("h"))
        counts = pl.concat(frames).group_by("h").len("docs")
        found_parts.append(counts.filter(pl.col("docs") >= config.min_documents))
    result = pl.concat(found_parts).sort("h").cast({"h": pl.UInt64, "docs": pl.UInt32})
    return result.to_arrow().replace_schema_metadata(params)


def hash_range_filter(part: int, parts: int) -> pc.Expression:
    """Parquet filter on ``h`` for hash slice ``part`` of ``parts`` (the last one ends at
    2^64 - 1 inclusive); sorted files with small row groups read only that slice."""
    span = (1 << 64) // parts
    low = pc.field("h") >= pa.scalar(part * span, pa.uint64())
    if part == parts - 1:
        return low
    return low & (pc.field("h") < pa.scalar((part + 1) * span, pa.uint64()))


def remove_boilerplate(
    texts: pa.Array | pa.ChunkedArray,
    sources: pa.Array | pa.ChunkedArray,
    boilerplate: np.ndarray,
    config: LineDedupConfig,
) -> tuple[pa.Array, np.ndarray]:
    """Texts without boilerplate units, and the number of units removed from each."""
    num_docs = len(texts)
    if not config.enabled or len(boilerplate) == 0 or num_docs == 0:
        return pa.array(texts, pa.string()), np.zeros(num_docs, np.int64)
    units = _units(texts, sources, config)
    hit = np.isin(units["h"].to_numpy(), boilerplate)
    units = units.with_columns((pl.col("eligible") & pl.Series(hit)).alias("drop"))
    dropped = units.group_by("doc").agg(pl.col("drop").sum().alias("n"))
    removed = np.zeros(num_docs, np.int64)
    removed[dropped["doc"].to_numpy()] = dropped["n"].to_numpy()
    changed = np.flatnonzero(removed)
    if len(changed) == 0:
        return pa.array(texts, pa.string()), removed
    rebuilt = (
        units.filter(pl.col("doc").is_in(changed) & ~pl.col("drop"))
        .group_by("doc", maintain_order=True)
        .agg(pl.col("unit").str.join(_separator(config)))
    )
    values = (
        pl.DataFrame({"doc": changed.astype(np.int64)})
        .join(rebuilt, on="doc", how="left")  # fully removed documents have no row: ""
        .select(pl.col("unit").fill_null(""))
        .to_series()
    )
    out = pl.Series("text", texts).cast(pl.String)
    return out.scatter(changed, values).to_arrow().cast(pa.string()), removed
