"""Shared pytest fixtures; shared helper code lives in ``tests/helpers/`` (tests never import
each other).

``packed_mix`` / ``packed_stages``: small packed-token corpora built once per module.

``slurm``: a real one-node Slurm cluster (tests/slurm_cluster.py) for the tests of a module;
skipped with the reason where Slurm cannot run (not root, ``slurm-wlm``/``munge`` missing).
Its ``SLURM_CONF`` is exported while the module's tests run, so ``sbatch``/``squeue`` and the
``SlurmLauncher`` talk to it.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.packing_data import build_packed_mix, build_packed_stages
from tests.slurm_cluster import SlurmCluster, slurm_cluster, slurm_unavailable


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = slurm_unavailable()
    if reason:
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as patch:
        root = tmp_path_factory.mktemp("slurm")
        with slurm_cluster(root) as cluster:
            patch.setenv("SLURM_CONF", str(cluster.conf))
            yield cluster


@pytest.fixture(scope="module")
def packed_mix(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A web/code/cjk mixture packed at seq 64 (``tests/helpers/packing_data.py``)."""
    return build_packed_mix(tmp_path_factory.mktemp("pack"))


@pytest.fixture(scope="module")
def packed_stages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A two-stage curriculum mixture packed at seq 32 (``tests/helpers/packing_data.py``)."""
    return build_packed_stages(tmp_path_factory.mktemp("stages"))
