"""The storage helper and the raw/filter stages against a real S3 endpoint (moto_server)."""

import gzip
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pretrain import storage
from pretrain.data.raw import build_raw_shard, list_source_files, plan_shards
from pretrain.filters.pipeline import FilterConfig, filter_shard
from pretrain.verify import count_rows

SENTENCES = [
    "The committee met on Tuesday to review the proposed budget for the coming year.",
    "Members discussed the allocation of funds to schools, roads and public libraries.",
    "They agreed to publish a detailed report before the next meeting in the spring.",
    "A local business owner asked whether the new parking rules would affect her shop.",
    "The chair explained that the changes were meant to make the town centre safer.",
    "Several residents said that the bus service had improved over the last few months.",
    "Others were worried about the cost of repairing the bridge near the old mill.",
    "The engineer who inspected it last winter will present her findings in April.",
    "After a short break, the meeting turned to plans for the summer festival.",
    "Volunteers will be needed to set up the stage and to sell tickets at the gate.",
    "The treasurer reminded everyone that last year's event had made a small profit.",
    "The meeting closed at nine o'clock, and the minutes will be posted online.",
]


def document(i: int) -> str:
    """Twelve distinct sentences in a rotated order: ordinary prose with no repetition."""
    order = SENTENCES[i:] + SENTENCES[:i]
    return f"Report number {i}. " + " ".join(order)


@pytest.fixture(scope="module")
def s3_endpoint() -> str:
    moto = Path(sys.executable).with_name("moto_server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "moto_server did not start"
            time.sleep(0.2)
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="campaign")
    yield endpoint
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    proc.terminate()
    proc.wait(timeout=10)


def test_storage_round_trips_on_s3(s3_endpoint: str) -> None:
    uri = "s3://campaign/t/table.parquet"
    table = pa.table({"id": ["a", "b"], "n": [1, 2]})
    storage.write_table(table, uri)
    assert storage.read_table(uri).equals(table)
    storage.write_json({"x": 1}, "s3://campaign/t/meta.json")
    assert storage.read_json("s3://campaign/t/meta.json") == {"x": 1}
    assert storage.list_files("s3://campaign/t") == [
        "s3://campaign/t/meta.json",
        "s3://campaign/t/table.parquet",
    ]
    assert storage.exists(uri) and not storage.exists("s3://campaign/t/missing.json")


def test_raw_and_filter_stages_read_and_write_s3(s3_endpoint: str) -> None:
    lines = [json.dumps({"text": document(i), "url": f"https://example.org/{i}"}) for i in range(6)]
    lines.append("{not json")
    storage.write_bytes(
        gzip.compress("\n".join(lines).encode()), "s3://campaign/raw/part-0.jsonl.gz"
    )

    files = list_source_files("s3://campaign/raw", "web")
    (manifest,) = plan_shards(files, files_per_shard=None, max_shards=1, prefix="web")
    raw_dir = "s3://campaign/art/raw_shards/web-0000"
    stats = build_raw_shard(manifest, raw_dir)
    assert stats.documents == 6 and stats.rejected == {"malformed_json": 1}

    out = "s3://campaign/art/filtered_shards/web-0000"
    filtered = filter_shard(storage.join(raw_dir, "documents.parquet"), out, FilterConfig())
    kept = count_rows(storage.join(out, "documents.parquet"))
    rejected = count_rows(storage.join(out, "rejects.parquet"))
    assert filtered.documents_in == 6 == kept + rejected and kept == 6
