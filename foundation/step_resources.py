"""What each data step needs (CPU, memory), as op tags that the Ray executor reads.

``dagster-ray/config`` is read by dagster-ray's ``ray_executor`` (``app/ray_definitions.py``):
the step's Ray job asks for its ``num_cpus`` and ``memory`` bytes, so the Ray scheduler places
the step on a node with room; the in-process and multiprocess executors ignore it. The numbers
are sized for one step at the default sizes: a batch of shard groups runs one group at a time
(``foundation/per_shard.py``), a band partition is bounded by ``max_partition_rows``
(``bench/backfill_scale.py`` prints the measured peak RSS of ``dedup_pairs``); raise them with
``max_partition_rows`` or the shard-group size::

    @asset(op_tags=STEP_RESOURCES["dedup_pairs"])
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from dagster import Backoff, Failure, RetryPolicy

from pretrain.errors import ConfigError, DataError, StorageError

RAY_CONFIG_TAG = "dagster-ray/config"
MIB = 1 << 20


def step_tags(num_cpus: float, memory_mb: int) -> dict[str, str]:
    """Op tags asking for ``num_cpus`` CPUs and ``memory_mb`` MiB on the executing node."""
    ray = {"num_cpus": num_cpus, "memory": memory_mb * MIB}
    return {RAY_CONFIG_TAG: json.dumps(ray, sort_keys=True)}


STEP_RESOURCES: dict[str, dict[str, str]] = {
    "raw_shards": step_tags(1, 512),
    "filtered_shards": step_tags(1, 768),
    "minhash_signatures": step_tags(1, 512),
    "dedup_pairs": step_tags(1, 512),  # one band x slice: ~max_partition_rows rows at once
    "dedup_clusters": step_tags(1, 1024),  # the union: grows with duplicates, not the corpus
    "deduped_shards": step_tags(1, 512),
}

# A step whose process or node died (or any unexpected error) is retried; bad input is not
# (see ``bad_input_not_retried``): it would fail again for the same reason.
STEP_RETRY = RetryPolicy(max_retries=2, delay=1.0, backoff=Backoff.LINEAR)
# what fails again on a retry: bad input or settings, and a store that refuses writes (a full
# disk, a read-only mount, no permission) until someone frees space or fixes the root
NOT_RETRIED = (DataError, ConfigError, StorageError)


def bad_input_not_retried(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An asset body whose error of :data:`NOT_RETRIED` fails the step at once, with its
    reason."""

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NOT_RETRIED as exc:
            reason = f"{type(exc).__name__}: {exc}"
            raise Failure(description=reason, allow_retries=False) from exc

    return body
