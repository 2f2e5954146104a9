"""Turn library stats and configs into Dagster metadata (counts, config hash, code version)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

import pretrain
from pretrain.verify import CheckOutcome


def config_hash(config: Any) -> str:
    payload = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def to_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Scalars pass through; dicts and lists become JSON metadata; Markdown stays Markdown."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict | list | tuple):
            out[key] = MetadataValue.json(value)
        elif isinstance(value, str) and key.endswith("_md"):
            out[key] = MetadataValue.md(value)
        elif value is None:
            out[key] = MetadataValue.text("none")
        else:
            out[key] = value
    return out


def stage_metadata(stats: Any, config: Any, **extra: Any) -> dict[str, Any]:
    """Stats of one library call plus the config hash and code version of the run."""
    values = dict(stats.as_metadata())
    values.update(extra)
    values["config_hash"] = config_hash(config)
    values["library_version"] = pretrain.__version__
    return to_metadata(values)


def check_result(
    name: str, outcome: CheckOutcome, *, warn: bool = False, asset_key: str | None = None
) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=name,
        asset_key=asset_key,
        passed=outcome.passed,
        severity=AssetCheckSeverity.WARN if warn else AssetCheckSeverity.ERROR,
        description=outcome.description,
        metadata=to_metadata(outcome.metadata),
    )
