"""Counting and timing probes for ``bench/control_plane_scale.py``.

- :class:`MotoLog`: the HTTP requests ``moto_server`` answered (the S3 reads and writes), next to
  the SQL statements and store reads ``tests/helpers/ticks.py`` counts.
- :func:`page_load_s`: a page of the Dagster UI opened in headless Chromium (a fresh profile:
  cold), timed from navigation to the moment the page shows the text it is waited for, read
  through the DevTools protocol.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class MotoLog:
    """The HTTP requests ``moto_server`` has answered, from its access log (one line each)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def count(self) -> int:
        time.sleep(0.2)  # moto writes its access line after the response
        if not self.path.exists():
            return 0
        return sum(1 for line in self.path.read_text(errors="replace").splitlines()
                   if re.search(r'" [2-5]\d\d ', line))  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto(log: Path) -> Iterator[str]:
    """``moto_server`` on a free port, its access log in ``log``; yields the endpoint."""
    port = free_port()
    exe = Path(sys.executable).with_name("moto_server")
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _listening(port), 30, "moto_server")
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(poll_s)


@contextlib.contextmanager
def process(
    cmd: list[str], env: dict[str, str], log: Path, cwd: Path
) -> Iterator[subprocess.Popen]:
    """A server process in a session of its own, stopped with its group."""
    import signal

    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


# -- headless Chromium through the DevTools protocol ---------------------------------------------


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _Tab:
    def __init__(self, ws_url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(ws_url, max_size=None, open_timeout=30)
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def text(self) -> str:
        found = self.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''",
                          returnByValue=True)  # fmt: skip
        return str(found.get("result", {}).get("value") or "")


def page_load_s(url: str, shown: Callable[[str], bool], timeout_s: float = 120) -> dict[str, Any]:
    """Open ``url`` in a fresh headless Chromium; seconds from navigation until ``shown(text)``
    holds for the page's visible text (polled every 50 ms). ``timed_out`` when it never does."""
    assert CHROMIUM, "chromium is not installed"
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1600,1000", "--remote-debugging-port=0",
                 f"--user-data-dir={profile}", "about:blank"]  # fmt: skip
        proc = subprocess.Popen([CHROMIUM, *flags], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            port = wait_for(lambda: port_file.exists() and port_file.read_text().split("\n")[0],
                            30, "chromium's DevTools port", poll_s=0.05)  # fmt: skip
            targets = json.loads(
                urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list").read()
            )
            page = next(t for t in targets if t.get("type") == "page")
            tab = _Tab(page["webSocketDebuggerUrl"])
            started = time.perf_counter()
            tab.call("Page.navigate", url=url)
            text = ""
            while time.perf_counter() - started < timeout_s:
                text = tab.text()
                if shown(text):
                    return {"s": round(time.perf_counter() - started, 2), "timed_out": False}
                time.sleep(0.05)
            return {"s": round(time.perf_counter() - started, 2), "timed_out": True,
                    "text": re.sub(r"\s+", " ", text)[:300]}  # fmt: skip
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
