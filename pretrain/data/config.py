"""Settings of the ingest stage (``raw_shards``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pretrain.data.extract import ExtractConfig
from pretrain.errors import ConfigError
from pretrain.settings import check_types


@dataclass(frozen=True, kw_only=True)
class RawShardConfig:
    """``max_docs`` stops reading a shard group after that many documents (None: read all);
    ``extract`` turns the HTML of WARC responses into main text."""

    max_docs: int | None = None
    extract: ExtractConfig = field(default_factory=ExtractConfig)

    def __post_init__(self) -> None:
        check_types(self)
        if self.max_docs is not None and self.max_docs < 1:
            raise ConfigError(f"max_docs={self.max_docs}: use at least 1, or None for all")
