"""The Dagster UI in headless Chromium: every asset and its lineage on the graph pages, and a
materialization launched through GraphQL that the asset page then shows.

Screenshots go to ``test-artifacts/ui/``. Skips when Debian's chromium is not installed
(``.ci/run`` installs it).
"""

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient

from tests.servers.dagster_server import dagster_dev

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
GROUP_URL = "/locations/__repository__@app.definitions/asset-groups/{}"
# each group page shows its own assets and, as lineage links, the neighbours in other groups
GROUPS = {
    "data": {
        "raw_shards",
        "quality_classifier",
        "filtered_shards",
        "minhash_signatures",
        "deduped_shards",
    },
    "dedup": {
        "minhash_signatures",
        "dedup_pairs",
        "dedup_clusters",
        "deduped_shards",
        "filtered_shards",
        "data_mixture",
    },
    "corpus": {"deduped_shards", "data_mixture", "tokenizer", "packed_tokens", "checkpoints"},
    "training": {"packed_tokens", "tokenizer", "scaling_plan", "checkpoints", "eval_reports"},
    "planning": {"scaling_plan", "checkpoints"},
    "quarantine": {"quarantined_documents", "confirmed_quarantine", "data_mixture"},
}
ALL_ASSETS = set().union(*GROUPS.values())

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium not installed (apt-get install chromium)"
    ),
]


def chromium(url: str, *, screenshot: Path | None = None) -> str:
    """Render ``url`` headless (JS included); returns the DOM, optionally saves a screenshot."""
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--virtual-time-budget=20000", "--window-size=1600,1000",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as profile:
        flags.append(f"--user-data-dir={profile}")
        if screenshot is not None:
            subprocess.run(
                [CHROMIUM, *flags, f"--screenshot={screenshot}", url],
                capture_output=True,
                timeout=120,
            )
        done = subprocess.run(
            [CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120
        )
    return done.stdout


def test_asset_graph_and_a_materialization_in_the_browser(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with dagster_dev(tmp_path, tmp_path / "artifacts") as port:
        base = f"http://127.0.0.1:{port}"
        seen: set[str] = set()
        for group, expected in GROUPS.items():
            deadline = time.monotonic() + 60
            while True:  # the code location may still be loading on the first page
                dom = chromium(
                    base + GROUP_URL.format(group), screenshot=ARTIFACTS / f"group-{group}.png"
                )
                found = {name for name in ALL_ASSETS if name in dom}
                if found >= expected or time.monotonic() > deadline:
                    break
                time.sleep(2)
            assert found >= expected, (group, expected - found)
            seen |= found
        assert seen == ALL_ASSETS | {"raw_shards"}

        client = DagsterGraphQLClient("127.0.0.1", port_number=port)
        run_id = client.submit_job_execution("scaling_plan_job")
        deadline = time.monotonic() + 180
        while (status := client.get_run_status(run_id)) not in (
            DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED,
        ):  # fmt: skip
            assert time.monotonic() < deadline, f"run {run_id} still {status}"
            time.sleep(1)
        assert status == DagsterRunStatus.SUCCESS
        page = chromium(f"{base}/assets/scaling_plan", screenshot=ARTIFACTS / "scaling_plan.png")
        assert "chinchilla_num_params" in page and "llama_7b" in page
    assert (ARTIFACTS / "group-data.png").stat().st_size > 10_000
