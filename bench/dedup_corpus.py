"""Mixed real-text corpus for the dedup benchmarks: news, Common Crawl, OSCAR, Chinese reviews.

Reads ``../shared/data`` (never copied into the project). Deterministic: the same files give
the same documents in the same order::

    from bench.dedup_corpus import load_corpus, write_documents
    docs = load_corpus(per_source={"news": 2000, "cc": 700, "oscar": 650, "zh_reviews": 1500})
    write_documents(docs, "/tmp/corpus/documents.parquet")
"""

from __future__ import annotations

import gzip
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SOURCES = {
    "news": DATA / "web" / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz",
    "cc": DATA / "web" / "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
    "oscar": DATA / "web" / "oscar2019_hf_dummy_166langs.jsonl.gz",
    "zh_reviews": DATA / "web" / "zh" / "sophonplus_chinese_reviews_82k.jsonl.zst",
}
DEFAULT_MIX = {"news": 2000, "cc": 700, "oscar": 650, "zh_reviews": 1500}


def available() -> bool:
    return all(path.exists() for path in SOURCES.values())


def _lines(path: Path) -> Iterator[str]:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            yield from f
    else:
        import zstandard

        with path.open("rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(raw)
            yield from io.TextIOWrapper(reader, encoding="utf-8")


def load_corpus(per_source: dict[str, int] | None = None) -> list[dict]:
    """The first ``n`` records of each source as document dicts (``text`` may be empty)."""
    docs = []
    for source, limit in (per_source or DEFAULT_MIX).items():
        for i, line in enumerate(_lines(SOURCES[source])):
            if i >= limit:
                break
            record = json.loads(line)
            text = record.get("text") or ""
            url = (record.get("metadata") or {}).get("url") or f"{source}:{record.get('id', i)}"
            docs.append({"id": doc_id(text, source, f"{url}#{i}"), "text": text,
                         "source": source, "url": f"{url}#{i}", "num_chars": len(text),
                         "quality_score": 0.5})  # fmt: skip
    return docs


def scaled(docs: list[dict], copies: int, *, distinct: bool = False) -> list[dict]:
    """``copies`` variants of the corpus with new ids. Copy k > 0 appends one marker word
    (a near duplicate of the original), or with ``distinct`` shuffles the words (characters
    for text without spaces) with seed k, so the copy shares almost no 5-gram with it."""
    out = list(docs)
    for k in range(1, copies):
        rng = random.Random(k)
        for d in docs:
            if distinct:
                parts = d["text"].split() if " " in d["text"].strip() else list(d["text"])
                rng.shuffle(parts)
                text = (" " if " " in d["text"].strip() else "").join(parts) + f" v{k}"
            else:
                text = f"{d['text']} variant{k}"
            out.append({**d, "id": doc_id(text, d["source"], d["url"]), "text": text,
                        "url": f"{d['url']}-v{k}", "num_chars": len(text)})  # fmt: skip
    return out


def write_documents(docs: list[dict], uri: str) -> None:
    storage.write_table(documents_table(docs), uri)
