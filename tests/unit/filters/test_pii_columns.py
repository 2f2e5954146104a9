"""No raw PII in any output column: the filter stage masks url, metadata, source_id and a
reject's detail as it masks the text, in kept and rejected rows (issue 26 §2)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain.data.raw import ShardManifest, build_raw_shard
from pretrain.data.readers import RawFile
from pretrain.dedup.minhash import url_hashes
from pretrain.filters.config import FilterConfig
from pretrain.filters.funnel import funnel_markdown, funnel_reconciles
from pretrain.filters.langid import LangIdConfig
from pretrain.filters.pii import PiiConfig
from pretrain.filters.pii_fields import mask_columns, mask_url
from pretrain.filters.pipeline import filter_shard
from tests.helpers.corpora import ENGLISH, FRENCH

# Every string here is PII and must appear in no column of documents.parquet or rejects.parquet.
SECRETS = (
    "ann.lee@example.org", "ann.lee%40example.org", "bob.smith@example.com",
    "bob.smith%40example.com", "carol@example.net", "45522651", "13942877557", "192.168.10.42",
    "DE89 3704 0044 0532 0130 00", "3704 0044", "110105194912310021", "s3cr3t-token-value",
)  # fmt: skip
CONTACT = (
    " Write to ann.lee@example.org, the router is 192.168.10.42, pay to IBAN "
    "DE89 3704 0044 0532 0130 00 and quote the resident ID 110105194912310021."
)
THREAD_URL = "https://forum.example/thread/1524225179?email=bob.smith%40example.com&page=2"


def _records() -> list[dict]:
    meta = {
        "author_email": "ann.lee@example.org",
        "phone": "+49 30 45522651",
        "contact": {"mobile": 13942877557, "hosts": ["192.168.10.42", "forum.example"]},
        "session_token": "s3cr3t-token-value",
        "offset": 813814,
        "created": "2019-07-17T13:39:42.000Z",
    }
    return [
        {"id": "carol@example.net", "text": ENGLISH + CONTACT, "url": THREAD_URL, **meta},
        {
            "id": "r2",
            "text": FRENCH + CONTACT,
            "url": "https://forum.example/u/ann.lee@example.org/",
            **meta,
        },  # wrong language: rejected
        {
            "id": "r3",
            "text": ENGLISH + " Second copy." + CONTACT,
            "url": THREAD_URL,
            **meta,
        },  # same URL: rejected as duplicate_url, the URL in its detail
    ]


def _scan(table: pa.Table) -> list[tuple[str, str]]:
    """(column, secret) for every secret found in any cell of ``table``."""
    found = []
    for column in table.column_names:
        for value in table.column(column).to_pylist():
            found += [(column, s) for s in SECRETS if value is not None and s in str(value)]
    return found


@pytest.fixture
def filtered(tmp_path: Path) -> tuple[object, list[dict], list[dict], Path]:
    source = tmp_path / "forum.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _records()), encoding="utf-8")
    files = (RawFile(uri=str(source), source="web", kind="jsonl"),)
    manifest = ShardManifest(key="pii-0000", files=files)
    build_raw_shard(manifest, str(tmp_path / "raw"))
    raw = tmp_path / "raw" / "documents.parquet"
    assert _scan(pq.read_table(raw))  # the input does hold the PII
    config = FilterConfig(
        langid=LangIdConfig(languages=("en",)),
        gopher_quality=None,
        fineweb=None,
        pii=PiiConfig(drop_metadata_keys=("session_token",)),
    )
    stats = filter_shard(str(raw), str(tmp_path / "out"), config)
    assert funnel_reconciles(str(raw), str(tmp_path / "out")).passed
    kept = pq.read_table(tmp_path / "out" / "documents.parquet")
    rejects = pq.read_table(tmp_path / "out" / "rejects.parquet")
    assert _scan(kept) == [] and _scan(rejects) == []  # every column, every row
    return stats, kept.to_pylist(), rejects.to_pylist(), tmp_path


def test_no_raw_pii_in_any_column_of_kept_or_rejects(filtered: tuple) -> None:
    stats, kept, rejects, _ = filtered
    assert stats.kept == 1 and stats.dropped == {"duplicate_url": 1, "wrong_language": 1}
    doc = kept[0]
    assert doc["url"] == "https://forum.example/thread/1524225179?email=<EMAIL>&page=2"
    assert doc["source_id"] == "<EMAIL>"
    assert doc["text"].endswith(
        " Write to <EMAIL>, the router is <IP_ADDRESS>, pay to IBAN <IBAN> and quote the "
        "resident ID <CN_RESIDENT_ID>."
    )
    meta = json.loads(doc["metadata"])
    assert "session_token" not in meta
    assert meta["author_email"] == "<EMAIL>" and meta["phone"] == "<PHONE>"
    assert meta["contact"] == {"mobile": "<PHONE>", "hosts": ["<IP_ADDRESS>", "forum.example"]}
    assert meta["url"] == doc["url"]  # the input's url field, masked as a URL
    assert meta["offset"] == 813814 and meta["created"] == "2019-07-17T13:39:42.000Z"
    by_reason = {r["reason"]: r for r in rejects}
    assert by_reason["duplicate_url"]["detail"] == doc["url"]
    assert by_reason["wrong_language"]["url"] == "https://forum.example/u/<EMAIL>/"


def test_what_was_masked_is_counted(filtered: tuple) -> None:
    stats, _, _, _ = filtered
    assert stats.pii_masked == {"cn_resident_id": 1, "email": 1, "iban": 1, "ip_address": 1}
    columns = stats.pii_masked_columns
    for rows in ("kept", "rejected"):
        assert columns[f"{rows}.metadata.dropped_keys"] == (1 if rows == "kept" else 2)
    assert columns["kept.url.email"] == 1 and columns["kept.source_id.email"] == 1
    # metadata: author_email, url; phone and contact.mobile; one private address
    assert columns["kept.metadata.email"] == 2 and columns["kept.metadata.phone"] == 2
    assert columns["kept.metadata.ip_address"] == 1
    assert columns["rejected.text.iban"] == 2 and columns["rejected.detail.email"] == 1
    assert "kept.text.iban" not in columns  # the kept text is counted in pii_masked
    assert "| rejected.detail.email | 1 |" in funnel_markdown(stats)
    assert stats.as_metadata()["pii_kept.url.email"] == 1


def test_masked_urls_still_tell_pages_apart_for_url_dedup() -> None:
    config = PiiConfig()
    urls = [mask_url(u, config)[0] for u in (
        "https://forum.example/thread/1524225179?email=bob%40example.com",
        "https://forum.example/thread/1524225180?email=eve%40example.com",
        "http://x.blogspot.com/2014/06/a.html?showComment=1402201640051",
        "https://www.flickr.com/photos/7281432@N05/23617213134",
    )]  # fmt: skip
    assert urls[0] == "https://forum.example/thread/1524225179?email=<EMAIL>"
    assert urls[2:] == [
        "http://x.blogspot.com/2014/06/a.html?showComment=1402201640051",  # ids are no phones
        "https://www.flickr.com/photos/7281432@N05/23617213134",
    ]
    hashes = url_hashes(pa.array(urls), seed=0).to_pylist()
    assert None not in hashes and len(set(hashes)) == 4  # the dedup URL band still works


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://a.example/p?tel=%2B49%2030%2045522651", "https://a.example/p?tel=<PHONE>"),
        (
            "https://a.example/p?phone=4155550132&id=4155550132",
            "https://a.example/p?phone=<PHONE>&id=4155550132",
        ),  # the key says phone
        (
            "https://a.example/u/ann@example.org#ip-81.2.69.142",
            "https://a.example/u/<EMAIL>#ip-<IP_ADDRESS>",
        ),
        (
            "https://a.example/w?title=User:195.234.74.142&action=edit",
            "https://a.example/w?title=User:<IP_ADDRESS>&action=edit",
        ),
        ("https://a.example/pay?to=DE89370400440532013000", "https://a.example/pay?to=<IBAN>"),
        (
            "https://a.example/n%C3%A9?q=ann%40example.org%20x",
            "https://a.example/n%C3%A9?q=<EMAIL>%20x",
        ),
        ("https://a.example/1748-5908-7-83?rev=1561627232", None),  # a DOI, a timestamp
        ("forum.example/u?mail=ann@example.org", "forum.example/u?mail=<EMAIL>"),  # no scheme
        (
            "gw.example/send?to=ann%40example.org&n=1524225179",
            "gw.example/send?to=<EMAIL>&n=1524225179",
        ),
        ("data/ann%40example.org file.txt", "data/<EMAIL>%20file.txt"),  # no URL: decoded too
        ("http://[bad/ann@example.org", "http://[bad/<EMAIL>"),  # not parseable, still masked
    ],
)
def test_url_pieces(url: str, masked: str | None) -> None:
    assert mask_url(url, PiiConfig())[0] == (masked if masked is not None else url)


def test_metadata_masking_keeps_what_is_not_pii_byte_for_byte() -> None:
    clean = '{"warc_date": "2019-07-17T12:15:59.000Z", "uncompressed_offset": 1725357}'
    row = {"metadata": clean, "url": "https://a.example/2019/07/1524225179/"}
    assert mask_columns(row, PiiConfig()) == {} and row["metadata"] == clean
    row = {"metadata": "not json: call +49 30 45522651"}  # masked as text
    assert mask_columns(row, PiiConfig()) == {"metadata.phone": 1}
    assert row["metadata"] == "not json: call <PHONE>"
    row = {"metadata": '{"ann@example.org": 1, "<EMAIL>": 2, "list": [["bob@example.com"]]}'}
    assert mask_columns(row, PiiConfig()) == {"metadata.email": 2}
    assert json.loads(row["metadata"]) == {"<EMAIL>": 1, "<EMAIL>~2": 2, "list": [["<EMAIL>"]]}


def test_metadata_strength_follows_the_key() -> None:
    meta = {
        "id": "1524225179",  # an id: no bare digit run is a phone here
        "post_id": 13942877557,
        "note": "call 4155550132",  # free text: the text's detectors
        "contact": {"phone": 493045522651},  # an integer under a phone key: read as E.164
        "cc_number": "4111 1111 1111 1111",
        "nul": "a\u0000b ann@example.org",
    }
    row = {"metadata": json.dumps(meta)}
    counts = mask_columns(row, PiiConfig())
    assert counts == {"metadata.phone": 2, "metadata.credit_card": 1, "metadata.email": 1}
    assert json.loads(row["metadata"]) == {
        **meta,
        "note": "call <PHONE>",
        "contact": {"phone": "<PHONE>"},
        "cc_number": "<CREDIT_CARD>",
        "nul": "a\u0000b <EMAIL>",
    }
