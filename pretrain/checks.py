"""What an invariant check returns, and the row count most checks start from.

Every stage's checks (:mod:`pretrain.verify`, :mod:`pretrain.filters.funnel`,
:mod:`pretrain.dedup.pairs`) return a :class:`CheckOutcome`; the Dagster layer turns each into an
asset check result::

    outcome = CheckOutcome(rows > 0, f"{rows} documents", {"rows": rows})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq

from pretrain import storage


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


def count_rows(uri: str) -> int:
    """Rows of a Parquet file from its footer (0 when the file does not exist)."""
    if not storage.exists(uri):
        return 0
    fs, path = storage.filesystem(uri)
    with fs.open_input_file(path) as f:
        return pq.ParquetFile(f).metadata.num_rows
