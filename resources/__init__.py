"""Swappable Dagster resources: artifact storage and the training launcher."""

from resources.launcher import TorchrunLauncher
from resources.storage import ArtifactStore

__all__ = ["ArtifactStore", "TorchrunLauncher"]
