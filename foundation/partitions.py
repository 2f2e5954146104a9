"""Partitions: data assets per shard group, checkpoints and eval reports per checkpoint key.

A shard group is a bounded set of raw files whose manifest lives in the artifact store at
``manifests/<shard>.json``; registering a shard writes the manifest, then adds the key.
Band partitions (``exact-s000``, ``url-s000``, ``b000-s000`` ... ``b013-s000``) are static,
sized from the default ``DedupConfig`` (bands x ``hash_slices``): each ``dedup_pairs``
partition verifies one band's candidates in one slice of the hash range. A launch whose dedup
settings need other partitions is refused before it computes anything
(:func:`check_band_layout`): change the defaults in ``pretrain/dedup/config.py`` instead.
Checkpoint keys look like ``b00-s000000200`` (branch + step), so a resumed branch never
reuses a key. Experiment keys are the names proxy experiments are registered under
(``experiment_specs/<name>.json``).
"""

from dagster import DynamicPartitionsDefinition, StaticPartitionsDefinition

from pretrain.dedup.config import DedupConfig
from pretrain.dedup.pairs import band_partition_keys, check_partition_layout

# the run tags of a run over a range of partitions (a batch of shard groups)
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
# the names as str for the instance calls (a DynamicPartitionsDefinition's .name is optional)
SHARD_PARTITIONS_NAME = "shards"
shard_partitions = DynamicPartitionsDefinition(name=SHARD_PARTITIONS_NAME)
band_partitions = StaticPartitionsDefinition(band_partition_keys(DedupConfig()))
CHECKPOINT_PARTITIONS_NAME = "checkpoints"
checkpoint_partitions = DynamicPartitionsDefinition(name=CHECKPOINT_PARTITIONS_NAME)
# one partition per rollback decision that skipped data: ``b00-s000000041-to-b01``
QUARANTINE_PARTITIONS_NAME = "quarantine_decisions"
quarantine_partitions = DynamicPartitionsDefinition(name=QUARANTINE_PARTITIONS_NAME)
# one partition per proxy experiment (its registered name): ``mix-0a1b2c3d-s0``
EXPERIMENT_PARTITIONS_NAME = "experiments"
experiment_partitions = DynamicPartitionsDefinition(name=EXPERIMENT_PARTITIONS_NAME)
# one partition per filter ablation arm (its variant's digest): ablation_pools[filt-<digest>]
ABLATION_PARTITIONS_NAME = "ablations"
ablation_partitions = DynamicPartitionsDefinition(name=ABLATION_PARTITIONS_NAME)


def check_band_layout(config: DedupConfig) -> DedupConfig:
    """``config`` if its band partitions are ``band_partitions``, else ConfigError saying why."""
    check_partition_layout(config, band_partitions.get_partition_keys())
    return config
