"""``ArtifactStore``: where every artifact of the campaign lives (a local folder or ``s3://``).

Assets ask it for URIs (``store.uri("filtered_shards", shard)``); the library does the IO
through :mod:`pretrain.storage`, so the same code writes locally or to S3.
"""

from __future__ import annotations

import os

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from pretrain import storage


class ArtifactStore(ConfigurableResource):
    """Root URI of the campaign's artifacts plus optional S3 endpoint settings."""

    root: str
    s3_endpoint_url: str | None = None
    _ready: bool = PrivateAttr(default=False)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # pyarrow's S3 client reads the standard AWS variable; set it only when configured.
        if self.s3_endpoint_url:
            os.environ["AWS_ENDPOINT_URL"] = self.s3_endpoint_url
        self._ready = True

    def uri(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    def manifest_uri(self, shard: str) -> str:
        return self.uri("manifests", f"{shard}.json")

    def local_dir(self, *parts: str) -> str:
        """A local directory for steps that need one (torchrun checkpoints, mmap reads)."""
        uri = self.uri(*parts)
        storage.local_path(uri).mkdir(parents=True, exist_ok=True)
        return uri
