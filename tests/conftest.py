"""Shared pytest fixtures.

``slurm``: a real one-node Slurm cluster (tests/slurm_cluster.py) for the tests of a module;
skipped with the reason where Slurm cannot run (not root, ``slurm-wlm``/``munge`` missing).
Its ``SLURM_CONF`` is exported while the module's tests run, so ``sbatch``/``squeue`` and the
``SlurmLauncher`` talk to it.
"""

from collections.abc import Iterator

import pytest

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
