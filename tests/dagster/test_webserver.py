"""The real Dagster webserver (``dagster dev``, as ``make ui`` runs it) serves the asset graph."""

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.graph import EXPECTED_EDGES
from tests.servers.dagster_server import dagster_dev

ROOT = Path(__file__).resolve().parents[2]
QUERY = "{ assetNodes { assetKey { path } dependencyKeys { path } } }"


@pytest.fixture()
def webserver(tmp_path: Path) -> Iterator[int]:
    with dagster_dev(tmp_path, tmp_path / "artifacts") as port:
        yield port


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


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
    assert set(graph) == {"raw_shards", "scaling_plan", *EXPECTED_EDGES}
    for child, parents in EXPECTED_EDGES.items():
        assert graph[child] == parents, child
