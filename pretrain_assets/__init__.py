"""Dagster assets, asset checks and partitions for the pretraining campaign.

The one ``Definitions`` lives in :mod:`app.definitions`; ``workspace.yaml``
loads it for ``dagster dev``.
"""
