"""Shared pytest fixtures; shared helper code lives in ``tests/helpers/`` (tests never import
each other).

``packed_mix`` / ``packed_stages``: small packed-token corpora built once per module.

``slurm``: a real one-node Slurm cluster (tests/servers/slurm_cluster.py) for the tests of a module;
skipped with the reason where Slurm cannot run (not root, ``slurm-wlm``/``munge`` missing).
Its ``SLURM_CONF`` is exported while the module's tests run, so ``sbatch``/``squeue`` and the
``SlurmLauncher`` talk to it.

``no_inherited_defs_state_storage`` (every test): a test starts with no Dagster definitions-state
storage in its context; a storage left behind is cleared and named in the warnings summary.

Signals: a suite started in the background by a shell without job control (``make test &`` in
a script, a CI harness) inherits SIGINT ignored. Dagster's ``setup_interrupt_handlers``
(``build_resources``, ``execute_in_process``) copies SIGINT's handler onto SIGTERM, so from the
first such test on the test process ignored SIGTERM, and so did every process a later test
started: ``dagster dev`` (30 s to its SIGKILL at teardown), the Slurm daemons, Dagster's
compute-log ``tail`` (up to 60 s at each step's end). That made the stop tests slow and, on a
slower machine, flaky. The suite restores Python's own SIGINT handler (and SIGTERM's default)
at start, as an interactive shell would have left them;
``test_signals.py`` checks that a process a test starts can be stopped with SIGTERM.
"""

import gc
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance

from foundation.dagster_internals import clear_defs_state_storage
from tests.helpers.packing_data import build_packed_mix, build_packed_stages
from tests.servers.slurm_cluster import SlurmCluster, slurm_cluster, slurm_unavailable

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _clear_defs_state_storage(where: str) -> None:
    if clear_defs_state_storage():
        warnings.warn(f"a Dagster defs-state storage was left in the context {where}", stacklevel=2)


_entered_an_instance = [False]


@pytest.fixture(scope="session", autouse=True)
def _note_entered_instances() -> Iterator[None]:
    enter = DagsterInstance.__enter__

    def noting(self: DagsterInstance) -> DagsterInstance:
        _entered_an_instance[0] = True
        return enter(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DagsterInstance, "__enter__", noting)
        yield


@pytest.fixture(autouse=True)
def no_inherited_defs_state_storage(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run the test with no definitions-state storage in its context, and clear one it leaves.

    Entering a ``DagsterInstance`` (``with instance:``) sets its storage in a context variable
    that loading ``Definitions`` reads, and leaving resets it to what it was when entered. Twice
    in CI, tests that enter no instance (``tests/unit/foundations/test_settings.py``) found a storage there whose
    instance was already garbage collected ("Attempted to resolve undefined DagsterInstance
    weakref"), while a full run here never left one between tests: the likely way is an
    instance entered inside a generator or context object that is only finalized by a later
    garbage collection, whose exit then restores the storage of a long-gone outer instance.
    So after a test that entered an instance, garbage is collected at once (such exits happen
    here, not in a later test), and any storage left is cleared and named in the warnings
    summary.
    """
    _clear_defs_state_storage(f"before {request.node.nodeid}")
    _entered_an_instance[0] = False
    yield
    if _entered_an_instance[0]:
        gc.collect()
    _clear_defs_state_storage(f"by {request.node.nodeid}")


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
