"""``build_mixture``: split, decontaminate, weight, cap and stage the documents; write the mixture.

    stats = build_mixture(document_uris, "art/data_mixture", MixtureConfig(...))

Steps: read deduplicated documents → leave out the confirmed quarantine (``exclude``) → per
source, split train/validation by id hash → drop training documents that share an n-gram with
the evaluation sets (``config.decontam``) → per stage and source compute the target characters
(stage fraction × budget × stage share), cap each source's total at ``epoch_cap × available``
and report the sources that are too small → walk each source's quality-weighted stream (see
``sampling.py``) → write the files.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.data.schema import DOCUMENT_SCHEMA, conform
from pretrain.decontam import EvalNgrams
from pretrain.errors import DataError
from pretrain.hashset import hash_score
from pretrain.mixture.config import MixtureConfig
from pretrain.mixture.report import MixtureStats, SourceMix, StageMix
from pretrain.mixture.sampling import split_source, walk_stream

# Every document column but per-stage bookkeeping: provenance (source_id, url, metadata) and
# scores (quality_score, toxicity_score, ...) reach train/val.parquet and, by id, the ledger.
_COLUMNS = [n for n in DOCUMENT_SCHEMA.names if n not in ("num_chars", "chars_removed")]
ROW_GROUP_BYTES = 4 * 2**20  # text bytes per Parquet row group of train/val.parquet
ROW_GROUP_ROWS = 8192  # and at most this many documents
# per source, per curriculum stage: the (document id, epoch) pairs taken
Picks = dict[str, list[list[tuple[str, int]]]]


def _read_documents(document_uris: list[str]) -> dict[str, list]:
    if not document_uris:
        raise DataError("build_mixture got no document files; materialize deduped_shards first")
    tables, files = [], []
    for uri in document_uris:
        table = storage.read_table(uri)
        missing = {"id", "text", "source"} - set(table.column_names)
        if missing:
            raise DataError(f"{uri} lacks columns {sorted(missing)}: not a documents table")
        tables.append(conform(table, _schema()))  # optional columns: nulls when absent
        files += [uri] * table.num_rows
    cols = pa.concat_tables(tables).to_pydict()
    if len(set(cols["id"])) != len(cols["id"]):
        raise DataError(_duplicates_message(cols["id"], files))
    return cols


def documents_per_source(document_uris: list[str]) -> dict[str, int]:
    """How many documents each source has in ``document_uris`` (only the ``source`` column is
    read): what a mixture of them would weigh."""
    counts: dict[str, int] = {}
    for uri in document_uris:
        for row in storage.read_table(uri, columns=["source"])["source"].value_counts().to_pylist():
            counts[row["values"]] = counts.get(row["values"], 0) + row["counts"]
    return dict(sorted(counts.items()))


def _duplicates_message(ids: list[str], files: list[str]) -> str:
    where: dict[str, list[str]] = {}
    for doc_id, uri in zip(ids, files, strict=True):
        where.setdefault(doc_id, []).append(uri)
    repeated = {k: v for k, v in where.items() if len(v) > 1}
    shown = "; ".join(f"{k} in {', '.join(v)}" for k, v in sorted(repeated.items())[:5])
    return (
        f"documents contain {len(repeated)} duplicate ids (e.g. {shown}); the mixture expects "
        "deduplicated shards: re-run dedup_clusters and deduped_shards over these files"
    )


def _schema() -> pa.Schema:
    return pa.schema([DOCUMENT_SCHEMA.field(name) for name in _COLUMNS])


def _stage_targets(
    config: MixtureConfig, available: dict[str, int]
) -> tuple[list[dict[str, float]], list[dict[str, int]]]:
    """Per stage: normalized shares and target characters per source."""
    sources = sorted(available)
    budget = config.budget_chars()
    budget = sum(available.values()) if budget is None else budget
    shares, targets = [], []
    for stage in config.stage_list():
        weights = stage.weights or config.weights or {s: float(available[s]) for s in sources}
        missing = [s for s in sources if s not in weights]
        unknown = [s for s in weights if s not in available]
        if missing or unknown:
            raise DataError(
                f"mixture weights (stage '{stage.name}') do not match the data: sources "
                f"without a weight {missing} (add them, 0.0 excludes one), weights for absent "
                f"sources {unknown} (remove them)"
            )
        total = sum(weights.values())
        if total <= 0:
            raise DataError("no source has train characters; check the document shards")
        share = {s: weights[s] / total for s in sources}
        shares.append(share)
        targets.append({s: round(share[s] * stage.fraction * budget) for s in sources})
    return shares, targets


def _decontaminate(
    cols: dict[str, list],
    train_pool: dict[str, list[str]],
    config: MixtureConfig,
    row_of: dict[str, int],
) -> tuple[dict, list[dict]]:
    """Remove contaminated ids from ``train_pool`` in place; return (report, dropped rows)."""
    if config.decontam is None:
        return {"enabled": False}, []
    ngrams = EvalNgrams.load(config.decontam)
    dropped: list[dict] = []
    for source, pool in train_pool.items():
        keep = []
        for doc in pool:
            hits = ngrams.matches(cols["text"][row_of[doc]])
            if hits:
                dropped.append({"id": doc, "source": source, "eval_sets": ",".join(hits)})
            else:
                keep.append(doc)
        train_pool[source] = keep
    per_set = {name: 0 for name in ngrams.sets}
    for row in dropped:
        for name in row["eval_sets"].split(","):
            per_set[name] += 1
    per_source = {s: sum(r["source"] == s for r in dropped) for s in sorted(train_pool)}
    report = {"enabled": True, **ngrams.report(), "dropped": len(dropped)}
    return {**report, "dropped_by_eval_set": per_set, "dropped_by_source": per_source}, dropped


def _reason_kind(reason: str) -> str:
    """``quarantine <decision>`` or ``<duplicate kind> of a quarantined document``."""
    if " of quarantined " in reason:
        return reason.split(" of quarantined ")[0] + " of a quarantined document"
    return reason.split(" (")[0]


def _exclude(cols: dict[str, list], exclude: dict[str, str] | None) -> tuple[dict, list[dict]]:
    """Drop the quarantined ids (``exclude``: id → reason) before anything else; (report, rows)."""
    if exclude is None:
        return {"enabled": False}, []
    keep = [i for i, doc in enumerate(cols["id"]) if doc not in exclude]
    dropped = [
        {"id": doc, "source": src, "chars": len(text), "reason": exclude[doc]}
        for doc, src, text in zip(cols["id"], cols["source"], cols["text"], strict=True)
        if doc in exclude
    ]
    if len(keep) < len(cols["id"]):
        for name in list(cols):
            cols[name] = [cols[name][i] for i in keep]
    by_source: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    for row in dropped:
        by_source[row["source"]] = by_source.get(row["source"], 0) + 1
        kind = _reason_kind(row["reason"])
        by_reason[kind] = by_reason.get(kind, 0) + 1
    report = {
        "enabled": True,
        "listed_documents": len(exclude),
        "excluded_documents": len(dropped),
        "excluded_chars": sum(r["chars"] for r in dropped),
        "not_in_documents": len(exclude) - len(dropped),  # already gone (dedup, filters)
        "excluded_by_source": dict(sorted(by_source.items())),
        "excluded_by_reason": dict(sorted(by_reason.items())),
    }
    return report, dropped


def build_mixture(
    document_uris: list[str],
    output_dir_uri: str,
    config: MixtureConfig,
    *,
    exclude: dict[str, str] | None = None,
) -> MixtureStats:
    """Split, decontaminate, weight and write the mixture; see the module docstring.

    ``exclude`` (document id → reason, from :func:`pretrain.quarantine.exclusion_reasons`) leaves
    quarantined documents out of both splits; they are listed in ``quarantined.parquet``."""
    cols = _read_documents(document_uris)
    quarantine, quarantined = _exclude(cols, exclude)
    row_of = {doc: row for row, doc in enumerate(cols["id"])}
    chars = {doc: len(text) for doc, text in zip(cols["id"], cols["text"], strict=True)}
    by_source: dict[str, list[str]] = {}
    for doc, source in zip(cols["id"], cols["source"], strict=True):
        by_source.setdefault(source, []).append(doc)
    val_ids: dict[str, set[str]] = {}
    train_pool: dict[str, list[str]] = {}
    for source, docs in sorted(by_source.items()):
        val_ids[source], train_pool[source] = split_source(docs, config)
    decontam, dropped = _decontaminate(cols, train_pool, config, row_of)
    available = {s: sum(chars[i] for i in pool) for s, pool in train_pool.items()}
    shares, targets = _stage_targets(config, available)

    overall = {
        s: sum(st.fraction * sh[s] for st, sh in zip(config.stage_list(), shares, strict=True))
        for s in available
    }
    warnings: list[str] = [decontam["warning"]] if decontam.get("warning") else []
    too_small: list[str] = []
    picks: Picks = {}
    needed: dict[str, float] = {}
    for source in sorted(by_source):
        cap, wanted = config.epoch_cap(source), sum(t[source] for t in targets)
        needed[source] = wanted / available[source] if available[source] else float("inf")
        stage_targets = [t[source] for t in targets]
        if wanted > cap * available[source]:
            too_small.append(source)
            warnings.append(
                f"source '{source}' is too small for weight {overall[source]:.3f}: "
                f"needs {needed[source]:.2f} epochs, capped at {cap:g}; raise "
                f"max_epochs['{source}'], lower its weight, or add data"
            )
            scale = cap * available[source] / wanted
            stage_targets = [round(t * scale) for t in stage_targets]
        pool = train_pool[source]
        quality = [cols["quality_score"][row_of[i]] for i in pool]
        picks[source] = walk_stream(pool, [chars[i] for i in pool], quality, config, stage_targets)

    all_val = set().union(*val_ids.values())
    leaked = [i for per in picks.values() for st in per for i, _ in st if i in all_val]
    assert not leaked, f"validation documents leaked into train: {leaked[:3]}"
    stats = _stats(cols, row_of, chars, config, shares, picks, val_ids, train_pool, needed)
    stats = stats.with_extras(
        warnings=tuple(warnings),
        too_small=tuple(too_small),
        decontam=decontam,
        quarantine=quarantine,
    )
    _write(cols, row_of, picks, all_val, config, output_dir_uri, dropped)
    audit = pa.Table.from_pylist(
        quarantined,
        schema=pa.schema(
            [("id", pa.string()), ("source", pa.string()), ("chars", pa.int64()),
             ("reason", pa.string())]
        ),
    )  # fmt: skip
    storage.write_table(audit, storage.join(output_dir_uri, "quarantined.parquet"))
    storage.write_json(stats.to_json(), storage.join(output_dir_uri, "mixture.json"))
    return stats


def _write(
    cols: dict[str, list],
    row_of: dict[str, int],
    picks: Picks,
    all_val: set[str],
    config: MixtureConfig,
    out: str,
    dropped: list[dict],
) -> None:
    rows = sorted(
        (
            (stage, hash_score(config.seed, f"{epoch}:{doc}"), epoch, doc)
            for per_stage in picks.values()
            for stage, pairs in enumerate(per_stage)
            for doc, epoch in pairs
        )
    )
    take = [row_of[doc] for *_, doc in rows]
    source_of = cols["source"]
    val_rows = sorted(
        (row_of[i] for i in all_val),
        key=lambda r: (source_of[r], hash_score(config.seed, cols["id"][r]), cols["id"][r]),
    )
    table = pa.table(cols, schema=_schema())
    train = table.take(pa.array(take, pa.int64()))
    train = train.append_column("epoch", pa.array([r[2] for r in rows], pa.int32()))
    train = train.append_column("stage", pa.array([r[0] for r in rows], pa.int32()))
    val = table.take(pa.array(val_rows, pa.int64())).drop(["quality_score"])
    write_documents(train, storage.join(out, "train.parquet"))
    write_documents(val, storage.join(out, "val.parquet"))
    audit = pa.Table.from_pylist(
        dropped,
        schema=pa.schema(
            [("id", pa.string()), ("source", pa.string()), ("eval_sets", pa.string())]
        ),
    )
    storage.write_table(audit, storage.join(out, "decontaminated.parquet"))


def write_documents(
    table: pa.Table,
    uri: str,
    *,
    max_bytes: int = ROW_GROUP_BYTES,
    max_rows: int = ROW_GROUP_ROWS,
) -> None:
    """Write a document table (with a ``text`` column) as zstd Parquet in bounded row groups.

    A row group holds the documents whose cumulative text end falls in the same ``max_bytes``
    window (so at most ``max_bytes`` plus one document), split again at ``max_rows``. Readers
    that stream the file with ``ParquetFile.iter_batches`` (the packer) then hold one bounded
    row group, never the whole file. Same table, same bytes."""
    sizes = pc.fill_null(pc.binary_length(table["text"]), 0).to_numpy()
    bucket = (np.cumsum(sizes, dtype=np.int64) - 1) // max_bytes
    cuts = (np.flatnonzero(np.diff(bucket)) + 1).tolist()
    bounds = [0, *cuts, table.num_rows]
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema, compression="zstd", write_statistics=True) as w:
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            w.write_table(table.slice(lo, hi - lo), row_group_size=max_rows)
    storage.write_bytes(buf.getvalue(), uri)


def _stats(
    cols: dict[str, list],
    row_of: dict[str, int],
    chars: dict[str, int],
    config: MixtureConfig,
    shares: list[dict[str, float]],
    picks: Picks,
    val_ids: dict[str, set[str]],
    train_pool: dict[str, list[str]],
    needed: dict[str, float],
) -> MixtureStats:
    stages = config.stage_list()
    stage_chars = [
        {s: sum(chars[i] for i, _ in picks[s][k]) for s in picks} for k in range(len(stages))
    ]
    realized = {s: sum(sc[s] for sc in stage_chars) for s in picks}
    train_chars = sum(realized.values())
    target_share = {
        s: sum(st.fraction * sh[s] for st, sh in zip(stages, shares, strict=True)) for s in picks
    }

    def mean_quality(ids: list[str]) -> float | None:
        q = [cols["quality_score"][row_of[i]] for i in ids]
        q = [v for v in q if v is not None]
        return round(sum(q) / len(q), 4) if q else None

    sources = {}
    for s in sorted(picks):
        available = sum(chars[i] for i in train_pool[s])
        sources[s] = SourceMix(
            target_share=round(target_share[s], 6),
            realized_share=round(realized[s] / train_chars, 6) if train_chars else 0.0,
            epochs=round(realized[s] / available, 4) if available else 0.0,
            needed_epochs=round(needed[s], 4) if needed[s] != float("inf") else -1.0,
            epoch_cap=config.epoch_cap(s),
            train_docs=sum(len(p) for p in picks[s]),
            train_chars=realized[s],
            val_docs=len(val_ids[s]),
            val_chars=sum(chars[i] for i in val_ids[s]),
            available_train_docs=len(train_pool[s]),
            available_train_chars=available,
            mean_quality_available=mean_quality(train_pool[s]),
            mean_quality_train=mean_quality([i for p in picks[s] for i, _ in p]),
        )
    stage_mixes = tuple(
        StageMix(
            name=st.name,
            fraction=st.fraction,
            train_chars=sum(sc.values()),
            target_shares={s: round(v, 6) for s, v in sh.items()},
            realized_shares={
                s: round(v / sum(sc.values()), 6) if sum(sc.values()) else 0.0
                for s, v in sc.items()
            },
        )
        for st, sh, sc in zip(stages, shares, stage_chars, strict=True)
    )
    return MixtureStats(
        train_docs=sum(m.train_docs for m in sources.values()),
        train_chars=train_chars,
        val_docs=sum(m.val_docs for m in sources.values()),
        val_chars=sum(m.val_chars for m in sources.values()),
        budget_chars=config.budget_chars(),
        quality_alpha=config.quality_alpha,
        sources=sources,
        stages=stage_mixes,
    )
