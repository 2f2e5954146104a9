"""Filter ablations: a shard group filtered again with other settings, pooled for the proxies.

    config = with_overrides(FilterConfig(), {"min_quality_score": 0.5, "toxicity": None})
    pools, stats = filtered_pool("art/raw_shards/web-0000/documents.parquet", config,
                         tokenizer_uri=..., out_dir=..., group="web-0000", seq_len=256,
                         exclude_ids=validation, duplicate_ids=dedup_removed)

The group's raw documents go through the real filter stage with the arm's settings (a
temporary output), then lose the documents the campaign's dedup removed as duplicates and the
validation documents, and become a pool like any other. Documents an arm keeps that the
campaign's filter rejected were never deduplicated; that is the only difference from the
campaign's own path, and it is the same for every arm.
"""

from __future__ import annotations

import dataclasses
import tempfile
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pretrain import storage
from pretrain.errors import ConfigError
from pretrain.experiments.pools import PoolInfo, build_pool
from pretrain.filters.config import FilterConfig
from pretrain.filters.pipeline import filter_shard


def with_overrides(config: Any, overrides: Mapping[str, Any]) -> Any:
    """``config`` (a frozen dataclass) with nested overrides, as ``--filter.*`` options give
    them: ``{"langid": {"min_score": 0.5}, "toxicity": None}``; lists become tuples."""
    names = {f.name: f for f in dataclasses.fields(config)}
    hints = typing.get_type_hints(type(config))
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in names:
            raise ConfigError(f"{type(config).__name__} has no setting {key!r}")
        current = getattr(config, key)
        if isinstance(value, Mapping) and dataclasses.is_dataclass(current):
            changes[key] = with_overrides(current, value)
        elif isinstance(value, Mapping) and current is None:
            inner = [
                a
                for a in typing.get_args(hints[key])
                if isinstance(a, type) and dataclasses.is_dataclass(a)
            ]
            if not inner:
                raise ConfigError(f"{key}: {value!r} given for a setting that is not a section")
            changes[key] = with_overrides(inner[0](), value)
        else:
            changes[key] = tuple(value) if isinstance(value, list) else value
    return dataclasses.replace(config, **changes)


def filtered_pool(
    raw_uri: str,
    config: FilterConfig,
    *,
    tokenizer_uri: str,
    out_dir: str,
    group: str,
    seq_len: int,
    exclude_ids: frozenset[str] = frozenset(),
    duplicate_ids: frozenset[str] = frozenset(),
    seed: int = 0,
) -> tuple[list[PoolInfo], dict[str, Any]]:
    """(pools, the arm's filter stats) for one shard group (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="ablation-") as scratch:
        stats = filter_shard(raw_uri, scratch, config)
        kept = storage.read_table(str(Path(scratch) / "documents.parquet"))
        if duplicate_ids:
            dup = pa.array(sorted(duplicate_ids))
            kept = kept.filter(pc.invert(pc.is_in(kept["id"], dup)))
        documents = str(Path(scratch) / "kept.parquet")
        storage.write_table(kept, documents)
        pools = build_pool(
            [documents], tokenizer_uri, out_dir, group=group, seq_len=seq_len, seed=seed,
            exclude_ids=exclude_ids,
        )  # fmt: skip
    return pools, stats.as_metadata()
