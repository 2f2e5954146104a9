"""The storage helper and the raw/filter stages against a real S3 endpoint (moto_server)."""

import gzip
import json
import re
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pretrain import identity, storage
from pretrain.checks import count_rows
from pretrain.data.raw import build_raw_shard, list_source_files, plan_shards
from pretrain.filters.config import FilterConfig
from pretrain.filters.pipeline import filter_shard
from tests.servers.s3_server import moto_s3

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
def s3_endpoint() -> Iterator[str]:
    with moto_s3() as endpoint:
        yield endpoint


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


def test_a_small_write_is_one_request_and_a_refused_one_names_its_uri(tmp_path) -> None:
    """A marker, an identity or a manifest is one PUT on S3, not a multipart upload of three
    requests (the store holds thousands of them at campaign scale), and reading an identity
    is a read alone (HEAD and GET), not an exists and then a read; the delayed open that makes a write one request
    still fails loudly, at the write, naming the bucket."""
    log = tmp_path / "moto.log"
    with moto_s3(access_log=log):
        before = _requests(log)
        storage.write_json({"x": 1}, "s3://campaign/one/identity.json")
        made = _requests(log)[len(before) :]
        assert [line.split('"')[1].split()[0] for line in made] == ["PUT"], made
        assert storage.read_json("s3://campaign/one/identity.json") == {"x": 1}
        before = _requests(log)
        assert identity.read("s3://campaign/one") is None  # no identity: one HEAD
        identity.write("s3://campaign/one", identity.compute("s", "v1", {}, []))
        assert identity.read("s3://campaign/one") is not None  # HEAD + GET: no exists first
        made = [line.split('"')[1].split()[0] for line in _requests(log)[len(before) :]]
        assert made == ["HEAD", "PUT", "HEAD", "GET"], made
        with pytest.raises(OSError, match="bucket 'no-such-bucket'.*does not exist"):
            storage.write_json({"x": 1}, "s3://no-such-bucket/x.json")


def _requests(log) -> list[str]:
    """The requests moto answered, one access line each (any status: a ranged GET is 206)."""
    time.sleep(0.3)  # moto writes its access line after the response
    lines = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace")).splitlines()
    return [line for line in lines if re.search(r'" [2-5]\d\d ', line)]
