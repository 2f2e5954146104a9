"""Partitions: data assets per shard group, checkpoints and eval reports per checkpoint key.

A shard group is a bounded set of raw files whose manifest lives in the artifact store at
``manifests/<shard>.json``; registering a shard writes the manifest, then adds the key.
Band partitions (``exact-s000``, ``url-s000``, ``b000-s000`` ... ``b013-s000``) are static,
sized from the default ``DedupConfig`` (bands x ``hash_slices``): each ``dedup_pairs``
partition verifies one band's candidates in one slice of the hash range.
Checkpoint keys look like ``b00-s000000200`` (branch + step), so a resumed branch never
reuses a key. Experiment keys are the names proxy experiments are registered under
(``experiment_specs/<name>.json``).
"""

from dagster import DynamicPartitionsDefinition, StaticPartitionsDefinition

from pretrain.dedup.config import DedupConfig
from pretrain.dedup.pairs import band_partition_keys

shard_partitions = DynamicPartitionsDefinition(name="shards")
band_partitions = StaticPartitionsDefinition(band_partition_keys(DedupConfig()))
checkpoint_partitions = DynamicPartitionsDefinition(name="checkpoints")
# one partition per rollback decision that skipped data: ``b00-s000000041-to-b01``
quarantine_partitions = DynamicPartitionsDefinition(name="quarantine_decisions")
# one partition per proxy experiment (its registered name): ``mix-0a1b2c3d-s0``
experiment_partitions = DynamicPartitionsDefinition(name="experiments")
