"""Processes the tests start can be stopped with SIGTERM, even after Dagster set its handlers.

Dagster's ``setup_interrupt_handlers`` copies SIGINT's handler onto SIGTERM. When the suite
was started with SIGINT ignored (in the background, without job control) every later child
ignored SIGTERM; ``conftest.py`` restores the handlers at start (see its docstring).
"""

import signal
import subprocess

from dagster import build_resources


def ignored_signals_of_a_child() -> set[int]:
    status = subprocess.run(
        ["cat", "/proc/self/status"], capture_output=True, text=True, check=True
    ).stdout
    mask = int(
        next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16
    )
    return {number for number in range(1, 64) if mask >> (number - 1) & 1}


def test_a_child_started_after_dagster_set_its_handlers_can_be_stopped() -> None:
    with build_resources({}):  # Dagster's setup_interrupt_handlers runs here
        pass
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN
    ignored = ignored_signals_of_a_child()
    assert signal.SIGTERM not in ignored and signal.SIGINT not in ignored


def test_a_launch_in_a_process_that_ignores_sigterm_says_why_and_what_to_do() -> None:
    from dagster import build_op_context

    from resources.launching import SIGTERM_IGNORED, warn_if_a_stop_is_hindered

    warned: list[str] = []
    context = build_op_context()
    context.log.warning = warned.append  # type: ignore[method-assign]
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        warn_if_a_stop_is_hindered(context, longest_stop_s=10)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert warned == [SIGTERM_IGNORED]
    warn_if_a_stop_is_hindered(context, longest_stop_s=10)
    assert warned == [SIGTERM_IGNORED]  # nothing more once SIGTERM is handled again
