"""What each data step needs (CPU, memory), as op tags that executors read.

``dagster-ray/config`` is read by dagster-ray's ``ray_executor`` (the Ray job of a step asks
for ``num_cpus`` and ``memory`` bytes, so the Ray scheduler places it on a node with room);
the in-process and multiprocess executors ignore it. The numbers are sized for one shard
group / one band partition at the default sizes (``bench/backfill_scale.py`` prints the
measured peak RSS per step); raise them with ``max_partition_rows`` or the shard-group size::

    @asset(op_tags=STEP_RESOURCES["dedup_pairs"])
"""

from __future__ import annotations

import json

from dagster import Backoff, RetryPolicy

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

# A step whose process or node died is retried; a step that fails for bad input fails again
# with the same reason (the error of the last attempt is what the run shows).
STEP_RETRY = RetryPolicy(max_retries=2, delay=1.0, backoff=Backoff.LINEAR)
