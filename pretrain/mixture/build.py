"""Data mixture: per-source train/validation split and sampling to target weights.

Reads deduplicated document shards (``DOCUMENT_SCHEMA`` Parquet), splits every source into
train and validation by a hash of the document id, then samples the train set so that each
source contributes its target share of characters: a small source is repeated (``epoch``
column) up to its epoch cap, a large one is cut in a deterministic hash order.

Usage::

    from pretrain.mixture import MixtureConfig, build_mixture
    stats = build_mixture(
        ["art/deduped_shards/s0/documents.parquet", "art/deduped_shards/s1/documents.parquet"],
        "art/data_mixture",
        MixtureConfig(weights={"web": 0.7, "code": 0.2, "prose": 0.1}, val_fraction=0.05),
    )
    print(stats.as_metadata())

Writes ``train.parquet`` (id, text, source, epoch), ``val.parquet`` (id, text, source) and
``mixture.json`` (written last: target vs realized shares, epochs, counts, warnings).

The split is a pure function of ``(seed, id)``: a document is validation iff
``int(sha1(f"{seed}:{id}")) % 10**6 < val_fraction * 10**6``, so adding documents never moves
existing ones between splits. The only exception is ``min_val_docs``: a source with at least
two documents but too few hashed into validation promotes its lowest-hash train documents.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import pyarrow as pa

from pretrain import storage
from pretrain.errors import ConfigError, DataError

_HASH_BUCKETS = 10**6
DEFAULT_MAX_EPOCHS = 4.0


@dataclass(frozen=True, kw_only=True)
class MixtureConfig:
    """How to split and weight sources. ``weights=None`` keeps natural proportions."""

    weights: dict[str, float] | None = None
    val_fraction: float = 0.05
    min_val_docs: int = 1
    seed: int = 0
    max_epochs: dict[str, float] = field(default_factory=dict)
    default_max_epochs: float = DEFAULT_MAX_EPOCHS
    token_budget_chars: int | None = None

    def __post_init__(self) -> None:
        if self.weights is not None:
            if not self.weights:
                raise ConfigError("MixtureConfig.weights is empty; pass None for natural shares")
            bad = {k: w for k, w in self.weights.items() if not w >= 0.0}
            if bad:
                raise ConfigError(f"MixtureConfig.weights must be >= 0, got {bad}")
            if sum(self.weights.values()) <= 0:
                raise ConfigError("MixtureConfig.weights sum to 0; give at least one source > 0")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ConfigError(
                f"MixtureConfig.val_fraction={self.val_fraction} must be in [0, 1), e.g. 0.05"
            )
        if self.min_val_docs < 0:
            raise ConfigError(f"MixtureConfig.min_val_docs={self.min_val_docs} must be >= 0")
        caps = {"default_max_epochs": self.default_max_epochs, **self.max_epochs}
        bad_caps = {k: v for k, v in caps.items() if not v >= 1.0}
        if bad_caps:
            raise ConfigError(
                f"MixtureConfig epoch caps must be >= 1.0 (1.0 = never repeat), got {bad_caps}"
            )
        if self.token_budget_chars is not None and self.token_budget_chars <= 0:
            raise ConfigError(
                "MixtureConfig.token_budget_chars must be a positive number of characters "
                "or None (None = as many train characters as the sources hold)"
            )

    def epoch_cap(self, source: str) -> float:
        return self.max_epochs.get(source, self.default_max_epochs)


@dataclass(frozen=True, kw_only=True)
class SourceMix:
    """What the mixture did with one source."""

    target_share: float
    realized_share: float
    epochs: float
    train_docs: int
    train_chars: int
    val_docs: int
    val_chars: int
    available_train_docs: int
    available_train_chars: int


@dataclass(frozen=True, kw_only=True)
class MixtureStats:
    train_docs: int
    train_chars: int
    val_docs: int
    val_chars: int
    sources: dict[str, SourceMix]
    warnings: tuple[str, ...]

    def to_json(self) -> dict:
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        return out

    def as_metadata(self) -> dict:
        return {
            "train_docs": self.train_docs,
            "train_chars": self.train_chars,
            "val_docs": self.val_docs,
            "val_chars": self.val_chars,
            "num_sources": len(self.sources),
            "num_warnings": len(self.warnings),
            "warnings": "\n".join(self.warnings),
            "sources": {name: asdict(mix) for name, mix in self.sources.items()},
        }


def hash_score(seed: int, key: str) -> int:
    """Deterministic bucket in [0, 10**6) for ``key`` under ``seed``."""
    return int(hashlib.sha1(f"{seed}:{key}".encode()).hexdigest(), 16) % _HASH_BUCKETS


def is_val(doc_id: str, seed: int, val_fraction: float) -> bool:
    """The hash rule alone (without the ``min_val_docs`` top-up)."""
    return hash_score(seed, doc_id) < round(val_fraction * _HASH_BUCKETS)


def _read_documents(document_uris: list[str]) -> pa.Table:
    if not document_uris:
        raise DataError("build_mixture got no document files; materialize deduped_shards first")
    tables = [storage.read_table(uri, columns=["id", "text", "source"]) for uri in document_uris]
    table = pa.concat_tables(tables).combine_chunks()
    ids = table.column("id").to_pylist()
    if len(set(ids)) != len(ids):
        raise DataError("documents contain duplicate ids; mixture expects deduplicated shards")
    return table


def _split_source(ids: list[str], config: MixtureConfig) -> tuple[set[str], list[str]]:
    """Return (val ids, train ids in hash order) for one source."""
    ordered = sorted(ids, key=lambda i: (hash_score(config.seed, i), i))
    cut = round(config.val_fraction * _HASH_BUCKETS)
    val = [i for i in ordered if hash_score(config.seed, i) < cut]
    if len(ids) >= 2 and len(val) < config.min_val_docs:
        val = ordered[: min(config.min_val_docs, len(ids) - 1)]
    val_set = set(val)
    return val_set, [i for i in ordered if i not in val_set]


def _sample_train(
    train_ids: list[str], chars: dict[str, int], target_chars: float
) -> list[tuple[str, int]]:
    """(id, epoch) pairs: whole epochs, then a hash-ordered prefix up to ``target_chars``."""
    available = sum(chars[i] for i in train_ids)
    if available == 0 or target_chars <= 0:
        return []
    full_epochs = int(target_chars // available)
    picked = [(i, epoch) for epoch in range(full_epochs) for i in train_ids]
    remainder, taken = target_chars - full_epochs * available, 0
    for i in train_ids:
        if taken >= remainder:
            break
        picked.append((i, full_epochs))
        taken += chars[i]
    return picked


def _targets(
    config: MixtureConfig, available: dict[str, int]
) -> tuple[dict[str, float], dict[str, float]]:
    """Per source: normalized target share and target train characters."""
    sources = sorted(available)
    weights = config.weights or {s: float(available[s]) for s in sources}
    missing = [s for s in sources if s not in weights]
    unknown = [s for s in weights if s not in available]
    if missing or unknown:
        raise DataError(
            f"mixture weights do not match the data: sources without a weight {missing} "
            f"(add them, 0.0 excludes one), weights for absent sources {unknown} (remove them)"
        )
    total_weight = sum(weights.values())
    if total_weight <= 0:
        raise DataError("no source has train characters; check the document shards")
    shares = {s: weights[s] / total_weight for s in sources}
    budget = config.token_budget_chars or sum(available.values())
    return shares, {s: shares[s] * budget for s in sources}


def build_mixture(
    document_uris: list[str], output_dir_uri: str, config: MixtureConfig
) -> MixtureStats:
    """Split, weight and write the mixture; see the module docstring."""
    table = _read_documents(document_uris)
    ids = table.column("id").to_pylist()
    texts = table.column("text").to_pylist()
    sources = table.column("source").to_pylist()
    text_of = dict(zip(ids, texts, strict=True))
    source_of = dict(zip(ids, sources, strict=True))
    chars = {i: len(t) for i, t in text_of.items()}

    by_source: dict[str, list[str]] = {}
    for doc, source in zip(ids, sources, strict=True):
        by_source.setdefault(source, []).append(doc)
    val_ids: dict[str, set[str]] = {}
    train_pool: dict[str, list[str]] = {}
    for source, docs in sorted(by_source.items()):
        val_ids[source], train_pool[source] = _split_source(docs, config)
    available = {s: sum(chars[i] for i in pool) for s, pool in train_pool.items()}
    shares, targets = _targets(config, available)

    warnings: list[str] = []
    picked: dict[str, list[tuple[str, int]]] = {}
    for source in sorted(by_source):
        cap = config.epoch_cap(source)
        target = targets[source]
        if target > cap * available[source]:
            needed = target / available[source] if available[source] else float("inf")
            warnings.append(
                f"source '{source}' is too small for weight {shares[source]:.3f}: needs "
                f"{needed:.2f} epochs, capped at {cap:g}; raise max_epochs['{source}'], "
                "lower its weight, or add data"
            )
            target = cap * available[source]
        picked[source] = _sample_train(train_pool[source], chars, target)

    all_val = set().union(*val_ids.values())
    leaked = [i for pairs in picked.values() for i, _ in pairs if i in all_val]
    assert not leaked, f"validation documents leaked into train: {leaked[:3]}"

    train_rows = sorted(
        (pair for pairs in picked.values() for pair in pairs),
        key=lambda p: (hash_score(config.seed, f"{p[1]}:{p[0]}"), p[1], p[0]),
    )
    val_rows = sorted(all_val, key=lambda i: (source_of[i], hash_score(config.seed, i), i))
    train = pa.table(
        {
            "id": [i for i, _ in train_rows],
            "text": [text_of[i] for i, _ in train_rows],
            "source": [source_of[i] for i, _ in train_rows],
            "epoch": pa.array([e for _, e in train_rows], pa.int32()),
        }
    )
    val = pa.table(
        {
            "id": val_rows,
            "text": [text_of[i] for i in val_rows],
            "source": [source_of[i] for i in val_rows],
        }
    )

    realized = {s: sum(chars[i] for i, _ in pairs) for s, pairs in picked.items()}
    train_chars = sum(realized.values())
    mixes = {
        s: SourceMix(
            target_share=round(shares[s], 6),
            realized_share=round(realized[s] / train_chars, 6) if train_chars else 0.0,
            epochs=round(realized[s] / available[s], 4) if available[s] else 0.0,
            train_docs=len(picked[s]),
            train_chars=realized[s],
            val_docs=len(val_ids[s]),
            val_chars=sum(chars[i] for i in val_ids[s]),
            available_train_docs=len(train_pool[s]),
            available_train_chars=available[s],
        )
        for s in sorted(by_source)
    }
    stats = MixtureStats(
        train_docs=train.num_rows,
        train_chars=train_chars,
        val_docs=val.num_rows,
        val_chars=sum(m.val_chars for m in mixes.values()),
        sources=mixes,
        warnings=tuple(warnings),
    )
    storage.write_table(train, storage.join(output_dir_uri, "train.parquet"))
    storage.write_table(val, storage.join(output_dir_uri, "val.parquet"))
    storage.write_json(stats.to_json(), storage.join(output_dir_uri, "mixture.json"))
    return stats
