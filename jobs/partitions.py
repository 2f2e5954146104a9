"""Partitions: data assets per shard group, checkpoints and eval reports per checkpoint key.

A shard group is a bounded set of raw files whose manifest lives in the artifact store at
``manifests/<shard>.json``; registering a shard writes the manifest, then adds the key.
Checkpoint keys look like ``b00-s000000200`` (branch + step), so a resumed branch never
reuses a key.
"""

from dagster import DynamicPartitionsDefinition

shard_partitions = DynamicPartitionsDefinition(name="shards")
checkpoint_partitions = DynamicPartitionsDefinition(name="checkpoints")
# one partition per rollback decision that skipped data: ``b00-s000000041-to-b01``
quarantine_partitions = DynamicPartitionsDefinition(name="quarantine_decisions")
