"""Stop a launched process and every process it started, even in other sessions.

torchrun starts each worker with ``start_new_session=True``, so the workers are *not* in
torchrun's process group: ``killpg(torchrun)`` alone leaves them running (and holding the
GPUs) once torchrun itself is SIGKILLed. We therefore track the whole tree through
``/proc`` (Linux), keep the snapshot while the tree changes, and signal every member's
process group. A zombie counts as gone.

    stop_process_tree(proc, term_timeout_s=90, kill_timeout_s=15)
"""

import os
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path


def _stat(pid: int) -> tuple[int, str] | None:
    """(ppid, state) of ``pid`` from /proc, or None when it no longer exists."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw.rsplit(")", 1)[1].split()  # the command name may contain spaces and ')'
    return int(fields[1]), fields[0]


def alive(pid: int) -> bool:
    """True while any thread of ``pid`` still runs (a zombie leader can have live threads)."""
    found = _stat(pid)
    if found is None:
        return False
    if found[1] not in ("Z", "X"):
        return True
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return False
    for tid in tasks:
        try:
            state = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state not in ("Z", "X"):
            return True
    return False


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := _stat(int(entry))) is not None:
            children[found[0]].append(int(entry))
    out, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


def _signal_tree(pids: set[int], sig: signal.Signals) -> None:
    groups = set()
    for pid in pids:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            continue
    for target in groups:
        try:
            os.killpg(target, sig)
        except ProcessLookupError:
            pass
    for pid in pids:  # members whose group we could not read
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class _Foreign:
    """A process that is not our child (known by PID only): ``alive`` is the authority."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        return None if alive(self.pid) else -1

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.returncode


def stop_process_tree(
    proc: subprocess.Popen | int, term_timeout_s: float, kill_timeout_s: float
) -> None:
    """SIGTERM the tree, wait, SIGKILL what is left; return only when every member is gone.

    ``proc`` is our child's ``Popen`` or the PID of any process (e.g. a torchrun whose launcher
    was another process)."""
    child = _Foreign(proc) if isinstance(proc, int) else proc
    tracked = {child.pid} | descendants(child.pid)
    for sig, timeout in ((signal.SIGTERM, term_timeout_s), (signal.SIGKILL, kill_timeout_s)):
        living = {pid for pid in tracked if alive(pid)}
        if not living:
            break
        _signal_tree(living, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            child.poll()  # reap our direct child
            if alive(child.pid):
                tracked |= descendants(child.pid)  # workers may still be starting
            if not any(alive(pid) for pid in tracked):
                break
            time.sleep(0.2)
    try:  # our own child: waitpid is the authority on whether it has ended
        child.wait(timeout=kill_timeout_s)
    except subprocess.TimeoutExpired:
        pass
    survivors = sorted(pid for pid in tracked if alive(pid))
    if child.returncode is None:
        survivors.append(child.pid)
    if survivors:
        raise RuntimeError(f"processes {survivors} survived SIGKILL; the GPUs may still be held")
