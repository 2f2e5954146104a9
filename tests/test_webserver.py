"""The real Dagster webserver (``dagster dev``, as ``make ui`` runs it) serves the asset graph."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.test_definitions import EXPECTED_EDGES

ROOT = Path(__file__).resolve().parents[1]
QUERY = "{ assetNodes { assetKey { path } dependencyKeys { path } } }"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture()
def webserver(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".nux").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "dagster.yaml", home / "dagster.yaml")
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PRETRAIN_ROOT": str(tmp_path / "artifacts")}
    dagster = Path(sys.executable).with_name("dagster")
    cmd = [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)]
    log = open(tmp_path / "dagster-dev.log", "wb")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        (tmp_path / "dagster-dev.log").read_text()[-3000:]
                    ) from None
                time.sleep(0.5)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.mark.slow
def test_webserver_serves_every_asset_with_its_lineage(webserver: int) -> None:
    deadline = time.monotonic() + 60
    while True:  # the code location may still be loading right after start-up
        nodes = graphql(webserver, QUERY).get("data", {}).get("assetNodes") or []
        if nodes or time.monotonic() > deadline:
            break
        time.sleep(1)
    graph = {
        "/".join(n["assetKey"]["path"]): {"/".join(d["path"]) for d in n["dependencyKeys"]}
        for n in nodes
    }
    assert set(graph) == {"raw_shards", *EXPECTED_EDGES}
    for child, parents in EXPECTED_EDGES.items():
        assert graph[child] == parents, child
