"""How much text the filter keeps of hard-wrapped news and books, and who gets a language.

    .venv/bin/python bench/cleaning_text_kept.py [--news 10788] [--cjk 2000]

Also run by ``bench/cleaning_quality.py`` (its one JSON line holds these numbers too).

Inputs (real data, ``../shared/data``): every Reuters-21578 story (hard-wrapped at ~65
characters, paragraphs marked by indentation; source ``news``), the 13 Project Gutenberg
books (wrapped at ~70, blank-line paragraphs; source ``books``), and short CJK texts: the
first ``--cjk`` Chinese reviews of at most 60 characters plus the sentences of the Chinese
and Japanese UDHR (source ``web``).

Three configurations run side by side through :func:`pretrain.filters.pipeline.filter_shard`:

- ``old``: the behaviour before issue 13 — C4's terminal-punctuation line rule on physical
  lines, no paragraph grouping, no bound on removed characters, no source profiles, a plain
  character count for ``min_chars``, books over 1,000,000 characters rejected;
- ``new_no_profiles``: the new defaults with every source treated as ``web``;
- ``new``: the new defaults with the shipped profiles (``news``, ``books``).

Measured per configuration: the share of raw non-whitespace characters kept among *kept*
news stories and books (whitespace normalization strips Reuters' indentation, which is no loss) (target ≥ 0.95; chunks of a split book are summed back per ``source_id``), the share of
news stories rejected and the top reasons, books kept, and the share of short CJK texts that
carry a ``language`` (kept or rejected). The old pipeline ran ``too_short`` before language ID,
so for ``old`` a text under 50 characters counts as unlabelled (that ordering is code, not
config). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq

from pretrain import storage
from pretrain.data.schema import doc_id, documents_table
from pretrain.filters.c4_fineweb import C4Config
from pretrain.filters.config import FilterConfig
from pretrain.filters.heuristics import HeuristicConfig
from pretrain.filters.pipeline import filter_shard

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
NEWS = DATA / "web" / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz"
BOOKS = DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"
ZH = DATA / "web" / "zh" / "sophonplus_chinese_reviews_82k.jsonl.zst"
UDHR = DATA / "web" / "langid" / "udhr_nltk_utf8.jsonl.gz"
OLD_MIN_CHARS = 50


def configs() -> dict[str, FilterConfig]:
    old = FilterConfig(
        c4=C4Config(drop_lines_without_terminal_punct=True),
        heuristics=HeuristicConfig(cjk_char_weight=1.0),
        unwrap=None,
        max_removed_fraction=1.0,
        profiles={},
    )
    new = FilterConfig()
    return {"old": old, "new_no_profiles": replace(new, profiles={}), "new": new}


def _rows(texts: list[tuple[str, str]], source: str) -> list[dict]:
    return [
        {"id": doc_id(t, source, sid), "source_id": sid, "text": t, "source": source,
         "url": f"bench:{sid}", "num_chars": len(t)}
        for sid, t in texts
    ]  # fmt: skip


def load_inputs(num_news: int, num_cjk: int) -> dict[str, list[dict]]:
    for path in (NEWS, BOOKS, ZH, UDHR):
        if not path.exists():
            raise SystemExit(f"{path} is missing: this benchmark needs ../shared/data")
    with gzip.open(NEWS, "rt", encoding="utf-8") as f:
        news = [(d["id"], d["text"]) for d in map(json.loads, f)][:num_news]
    with gzip.open(BOOKS, "rt", encoding="utf-8") as f:
        books = [(d["id"], d["text"]) for d in map(json.loads, f)]
    import zstandard

    cjk: list[tuple[str, str]] = []
    with zstandard.open(ZH, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            text = json.loads(line)["text"]
            if 0 < len(text.strip()) <= 60:
                cjk.append((f"zh-review-{i}", text))
            if len(cjk) >= num_cjk:
                break
    with gzip.open(UDHR, "rt", encoding="utf-8") as f:
        for d in map(json.loads, f):
            if d["id"].endswith(("Chinese_Mandarin-UTF8", "Japanese_Nihongo-UTF8")):
                parts = [s.strip() for s in re.split(r"(?<=[。！？])", d["text"])]
                cjk += [(f"{d['id']}-{i}", s) for i, s in enumerate(parts) if 5 <= len(s) <= 120]
    return {"news": _rows(news, "news"), "books": _rows(books, "books"), "cjk": _rows(cjk, "web")}


def _visible(text: str) -> int:
    """Characters that are not whitespace (normalization re-spaces text, it loses none)."""
    return len(text) - sum(text.count(c) for c in " \t\n\r\u3000\xa0")


def run(name: str, config: FilterConfig, inputs: dict[str, list[dict]], tmp: Path) -> dict:
    raw_uri = str(tmp / name / "raw.parquet")
    rows = inputs["news"] + inputs["books"] + inputs["cjk"]
    storage.write_table(documents_table(rows), raw_uri)
    started = time.perf_counter()
    stats = filter_shard(raw_uri, str(tmp / name / "out"), config)
    wall = time.perf_counter() - started
    kept = pq.read_table(tmp / name / "out" / "documents.parquet").to_pylist()
    rejects = pq.read_table(tmp / name / "out" / "rejects.parquet").to_pylist()
    raw_chars = {r["source_id"]: _visible(r["text"]) for r in rows}
    kept_chars: Counter[str] = Counter()
    for doc in kept:
        kept_chars[doc["source_id"]] += _visible(doc["text"])
    out: dict = {"wall_s": round(wall, 1)}
    for source in ("news", "books"):
        ids = {r["source_id"] for r in inputs[source]}
        kept_ids = [i for i in kept_chars if i in ids]
        kept_raw = sum(raw_chars[i] for i in kept_ids)
        out[f"{source}_kept_docs"] = len(kept_ids)
        out[f"{source}_char_share_kept"] = (
            round(sum(kept_chars[i] for i in kept_ids) / kept_raw, 4) if kept_raw else None
        )
        out[f"{source}_worst_doc_share"] = (
            round(min(kept_chars[i] / raw_chars[i] for i in kept_ids), 4) if kept_ids else None
        )
        reasons = Counter(r["reason"] for r in rejects if r["source_id"] in ids)
        out[f"{source}_rejected_rate"] = round(sum(reasons.values()) / len(ids), 4)
        out[f"{source}_top_reasons"] = dict(reasons.most_common(4))
    cjk_ids = {r["source_id"] for r in inputs["cjk"]}
    labelled = {
        d["source_id"] for d in kept + rejects if d["source_id"] in cjk_ids and d["language"]
    }
    if name == "old":  # too_short ran before language ID: those never got a label
        short = {r["source_id"] for r in inputs["cjk"] if len(r["text"].strip()) < OLD_MIN_CHARS}
        labelled -= short
    out["cjk_labelled_share"] = round(len(labelled) / len(cjk_ids), 4)
    out["cjk_kept_share"] = round(sum(d["source_id"] in cjk_ids for d in kept) / len(cjk_ids), 4)
    out["cjk_top_reasons"] = dict(
        Counter(r["reason"] for r in rejects if r["source_id"] in cjk_ids).most_common(4)
    )
    out["chars_removed_by_rule"] = stats.chars_removed
    return out


KEYS = ("news_char_share_kept", "news_rejected_rate", "books_char_share_kept",
        "books_kept_docs", "cjk_labelled_share")  # fmt: skip


def text_kept_report(num_news: int = 10788, num_cjk: int = 2000) -> dict:
    """Every configuration's measurements, printed as a table; returns the summary dict."""
    inputs = load_inputs(num_news, num_cjk)
    print(f"inputs: {len(inputs['news'])} news, {len(inputs['books'])} books, "
          f"{len(inputs['cjk'])} short CJK texts")  # fmt: skip
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in configs().items():
            results[name] = run(name, config, inputs, Path(tmp))
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    print(f"\n| metric | {' | '.join(results)} |\n|---|{'---:|' * len(results)}")
    for key in KEYS:
        print(f"| {key} | {' | '.join(str(r[key]) for r in results.values())} |")
    summary: dict = {"target_char_share_kept": 0.95}
    for name, r in results.items():
        summary.update({f"{name}_{k}": r[k] for k in (*KEYS, "news_kept_docs", "wall_s")})
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--news", type=int, default=10788)
    parser.add_argument("--cjk", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps({"bench": "cleaning_text_kept", **text_kept_report(args.news, args.cjk)}))


if __name__ == "__main__":
    main()
