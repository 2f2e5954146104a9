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
    """Root URI of the campaign's artifacts plus optional S3 endpoint settings.

    ``s3_endpoint_url`` is the campaign's one S3 endpoint setting: ``build_definitions`` gives
    the launcher's ``S3Resource`` (what the Slurm/Kubernetes jobs get) the same value."""

    root: str
    s3_endpoint_url: str | None = None
    _ready: bool = PrivateAttr(default=False)
    _saved_endpoint: tuple[str | None] | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # pyarrow's S3 client reads the standard AWS variable; set it only when configured, and
        # only while this execution runs (teardown puts the previous value back)
        if self.s3_endpoint_url:
            self._saved_endpoint = (os.environ.get("AWS_ENDPOINT_URL"),)
            os.environ["AWS_ENDPOINT_URL"] = self.s3_endpoint_url
        self._ready = True

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._saved_endpoint is None:
            return
        (previous,) = self._saved_endpoint
        if previous is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = previous
        self._saved_endpoint = None

    def uri(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    def manifest_uri(self, shard: str) -> str:
        return self.uri("manifests", f"{shard}.json")

    def local_dir(self, *parts: str) -> str:
        """A local directory for steps that need one (torchrun checkpoints, mmap reads)."""
        uri = self.uri(*parts)
        storage.local_path(uri).mkdir(parents=True, exist_ok=True)
        return uri
