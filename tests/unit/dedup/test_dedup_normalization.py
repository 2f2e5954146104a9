"""Dedup normalization v2, long documents and containment, on small self-written texts.

Two "editions" of one made-up novel differ the way real editions do (quotes, dashes, line
wrapping, ligatures, page numbers, a few words): normalization v2 must cluster them, v1 must
not. A book missing its last chapters is listed as containment, never removed.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import _char_bounded, compute_signatures
from pretrain.dedup.shingles import (
    batch_shingles,
    containment_pairs,
    jaccard_pairs,
    normalized,
    text_hashes,
)
from pretrain.errors import ConfigError

WORDS = (
    "the sea harbour lantern keeper wind rain ship sail north evening letter mother garden "
    "road village church bell winter summer river bridge mill miller daughter son captain "
    "storm morning night candle door window bread salt rope anchor cliff gull tide stone "
    "field horse cart market doctor parson widow friend stranger silence answer question"
).split()


def _novel(seed: int, chapters: int = 12, words_per_chapter: int = 400) -> str:
    """A made-up book: chapters of sentences with straight quotes and double hyphens."""
    rng = random.Random(seed)
    parts = []
    for chapter in range(1, chapters + 1):
        sentences = []
        for _ in range(words_per_chapter // 10):
            words = [rng.choice(WORDS) for _ in range(10)]
            words[0] = words[0].capitalize()
            if rng.random() < 0.2:
                sentences.append('"' + " ".join(words[:5]) + " -- " + " ".join(words[5:]) + '."')
            else:
                sentences.append(" ".join(words) + ".")
        parts.append(f"CHAPTER {chapter}\n\n" + " ".join(sentences) + f"\n\n[Page {chapter * 17}]")
    return "\n\n".join(parts)


def _second_edition(text: str, seed: int = 7) -> str:
    """Curly quotes, em dashes, a ligature, re-wrapped lines, new page numbers, 1% word edits."""
    rng = random.Random(seed)
    text = text.replace(" -- ", "\u2014").replace("fi", "\ufb01")
    out, quote_open = [], True
    for ch in text:
        if ch == '"':
            out.append("\u201c" if quote_open else "\u201d")
            quote_open = not quote_open
        else:
            out.append(ch)
    words = "".join(out).split()
    for i in range(len(words)):
        if rng.random() < 0.01:
            words[i] = rng.choice(WORDS)
        elif words[i].startswith("17") or words[i].endswith("]"):
            words[i] = words[i].replace("1", "3")  # page numbers of another printing
    lines, line = [], []
    for word in words:  # re-wrapped at ~60 columns
        line.append(word)
        if sum(map(len, line)) + len(line) > 60:
            lines.append(" ".join(line))
            line = []
    return "\n".join([*lines, " ".join(line)])


def _doc(text: str, url: str, quality: float = 0.5) -> dict:
    return {"id": doc_id(text, "books", url), "text": text, "source": "books", "url": url,
            "num_chars": len(text), "quality_score": quality}  # fmt: skip


def test_v2_normalizes_unicode_case_punctuation_and_digits() -> None:
    texts = pl.Series(["\uff28\uff45\uff4c\uff4c\uff4f\uff0c  World!", "\u201cIt\u2019s 1984\u201d \u2014 \ufb01ne\u2026",
                       "a+b = $5.00 \u00a9 2020", "", None])  # fmt: skip
    assert normalized(texts, "v2").to_list() == [
        "hello world", "it s 0 fine", "a b 0 0 0", "", ""
    ]  # fmt: skip
    assert (
        normalized(texts, "v1").to_list()[1] == "\u201cit\u2019s 1984\u201d \u2014 \ufb01ne\u2026"
    )


def test_cjk_punctuation_only_difference_is_identical_under_v2() -> None:
    chapter = ["\u7b2c\u4e00\u7ae0\u3002\u5979\u8bf4\uff1a\u201c\u6211\u4eec\u8d70\u5427\uff01\u201d\u7136\u540e\u51fa\u95e8\u4e86\u3002",
               "\u7b2c\u4e00\u7ae0. \u5979\u8bf4: \"\u6211\u4eec\u8d70\u5427!\" \u7136\u540e\u51fa\u95e8\u4e86."]  # fmt: skip
    pair = np.array([0]), np.array([1])
    v2 = batch_shingles(chapter, DedupConfig())
    assert v2.char_shingled.tolist() == [True, True]
    assert jaccard_pairs(v2, *pair)[0] == 1.0
    # v2 shingles contain no punctuation: 14 ideographs -> 10 character 5-grams
    assert v2.counts.tolist() == [10, 10]
    v1 = batch_shingles(chapter, DedupConfig(normalization="v1"))
    assert jaccard_pairs(v1, *pair)[0] < 0.5


def test_exact_key_uses_the_same_normalization() -> None:
    texts = pl.Series(["The Ship sailed, at 5 o'clock.", "the ship sailed at 7 o\u2019clock",
                       "The ship sank at 5 o'clock."])  # fmt: skip
    v2 = text_hashes(texts, seed=1)
    assert v2[0] == v2[1] and v2[0] != v2[2]
    symbols = text_hashes(pl.Series(["!!!", "???", "!!!"]), seed=1)  # normalize to ""
    assert symbols[0] != symbols[1] and symbols[0] == symbols[2]
    v1 = text_hashes(texts, seed=1, normalization="v1")
    assert v1[0] != v1[1]


def test_normalization_setting_is_validated_and_part_of_signature_params() -> None:
    with pytest.raises(ConfigError, match="normalization='v3'"):
        DedupConfig(normalization="v3")
    assert DedupConfig().signature_params()["normalization"] == "v2"
    assert DedupConfig(normalization="v1").signature_params()["normalization"] == "v1"
    with pytest.raises(ConfigError, match="containment_threshold"):
        DedupConfig(containment_threshold=1.5)


def _cluster(tmp_path: Path, docs: list[dict], config: DedupConfig) -> tuple[pl.DataFrame, dict]:
    uri = str(tmp_path / "docs" / "documents.parquet")
    storage.write_table(documents_table(docs), uri)
    sig = str(tmp_path / "sig" / "signatures.parquet")
    sig_stats = compute_signatures(uri, sig, config)
    stats = cluster_duplicates([sig], str(tmp_path / "clusters"), config).as_metadata()
    assert sig_stats.normalization == stats["normalization"] == config.normalization
    return pl.read_parquet(tmp_path / "clusters" / "clusters.parquet"), stats


def test_editions_of_one_book_cluster_under_v2_only(tmp_path: Path) -> None:
    first = _novel(seed=1)
    second = _second_edition(first)
    other = _novel(seed=2)
    docs = [_doc(first, "ed1", 0.9), _doc(second, "ed2"), _doc(other, "other")]
    a, b = np.array([0]), np.array([1])
    assert jaccard_pairs(batch_shingles([first, second], DedupConfig()), a, b)[0] > 0.9
    v1_j = jaccard_pairs(batch_shingles([first, second], DedupConfig(normalization="v1")), a, b)
    assert v1_j[0] < 0.5

    rows, stats = _cluster(tmp_path / "v2", docs, DedupConfig())
    assert dict(zip(rows["id"], rows["reason"], strict=True)) == {
        docs[0]["id"]: "survivor", docs[1]["id"]: "near_duplicate"
    }  # fmt: skip
    assert stats["removed_near"] == 1
    rows, stats = _cluster(tmp_path / "v1", docs, DedupConfig(normalization="v1"))
    assert rows.height == 0 and stats["removed"] == 0


def test_partial_copy_is_listed_as_containment_not_removed(tmp_path: Path) -> None:
    book = _novel(seed=3)
    partial = book[: int(len(book) * 0.7)]  # the first chapters only
    docs = [_doc(book, "book"), _doc(partial, "partial"), _doc(_novel(seed=4), "other")]
    batch = batch_shingles([book, partial], DedupConfig())
    assert containment_pairs(batch, np.array([0]), np.array([1]))[0] > 0.99
    assert jaccard_pairs(batch, np.array([0]), np.array([1]))[0] < 0.8
    # 32 bands of 4 rows make a J ~ 0.7 pair an LSH candidate (14 x 8 rarely would).
    config = DedupConfig(num_perm=128, bands=32, rows=4)
    rows, stats = _cluster(tmp_path, docs, config)
    assert rows.height == 0 and stats["removed"] == 0 and stats["containment_pairs"] == 1
    found = pq.read_table(tmp_path / "clusters" / "containment.parquet").to_pylist()
    assert [(r["contained_id"], r["container_id"]) for r in found] == [
        (docs[1]["id"], docs[0]["id"])
    ]
    assert found[0]["containment"] > 0.99
    off = DedupConfig(num_perm=128, bands=32, rows=4, containment_threshold=0.0)
    _, stats = _cluster(tmp_path / "off", docs, off)
    assert stats["containment_pairs"] == 0


def test_long_documents_pass_in_text_bounded_batches() -> None:
    texts = ["x" * 10, "y" * 100, "z" * 5, "w" * 7]
    batch = pa.RecordBatch.from_pydict({"id": ["a", "b", "c", "d"], "text": texts})
    pieces = list(_char_bounded(iter([batch]), max_bytes=20))
    assert [p.column("id").to_pylist() for p in pieces] == [["a"], ["b"], ["c", "d"]]
    book = _novel(seed=5, chapters=60)  # ~150k characters, one document
    shingled = batch_shingles([book, "short text"], DedupConfig())
    assert shingled.counts[0] > 20_000 and shingled.counts[1] == 1
