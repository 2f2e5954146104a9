"""``ShardSource``: the folder or ``s3://`` prefix the discovery sensor watches for new files."""

from dagster import ConfigurableResource


class ShardSource(ConfigurableResource):
    """Where new raw files land (``None``: discovery is off) and how to group them."""

    uri: str | None = None
    source_name: str = "web"
    files_per_shard: int = 64
    max_new_shards_per_tick: int = 100
