"""HTML → main text against hand-made gold: ours vs trafilatura vs resiliparse defaults.

    .venv/bin/python bench/extraction_quality.py [--limit N] [--only ours trafilatura]

Pages: ``../shared/data/extraction/dragnet_test_415pages.jsonl.gz`` (real 2012 news and blog
pages with gold main text; AGPL data: read here for evaluation only, never copied). Comments
are not main content (the gold keeps them apart). The pages are split by a hash of their id
into a *dev* half (used while tuning) and a *held-out* half (looked at only to report), so an
over-fitted rule shows as a gap between the halves.

Scores per page, averaged over pages (as trafilatura's own evaluation does):
Extractors: ``ours`` = ``ExtractConfig()`` (the default, ``"hybrid"``: tuned resiliparse, and
trafilatura on the pages whose extract looks wrong), ``ours_resiliparse`` (the first pass alone:
tuned resiliparse + tail trimming), ``ours_trafilatura_fast`` (trafilatura without its fallbacks), ``trafilatura`` (its defaults, the baseline),
``resiliparse_defaults`` (``main_content=True`` only: the stage before issue 14).

- token P/R/F1: bag of lower-case word tokens (``\\w+``), multiset overlap;
- shingle F1: sets of word 4-grams (order matters: a paragraph moved into a sidebar counts).
Speed: pages/s of each extractor on one core over the same pages (HTML already decoded),
timed interleaved page by page (every extractor on a page before the next page), so load
from other jobs on a shared machine affects all extractors alike.
Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pretrain.data.extract import ExtractConfig, extract_main_text  # noqa: E402

GOLD = ROOT.parent / "shared" / "data" / "extraction" / "dragnet_test_415pages.jsonl.gz"
WORD = re.compile(r"\w+")


def load_pages(limit: int | None) -> list[dict]:
    with gzip.open(GOLD, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f]
    return pages[:limit] if limit else pages


def half(page_id: str) -> str:
    return "dev" if hashlib.sha1(page_id.encode()).digest()[0] % 2 == 0 else "heldout"


def tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def scores(predicted: str, gold: str) -> dict[str, float]:
    pred, ref = tokens(predicted), tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    p = common / len(pred) if pred else 0.0
    r = common / len(ref) if ref else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    grams_p = {tuple(pred[i : i + 4]) for i in range(len(pred) - 3)}
    grams_r = {tuple(ref[i : i + 4]) for i in range(len(ref) - 3)}
    shared = len(grams_p & grams_r)
    sp = shared / len(grams_p) if grams_p else 0.0
    sr = shared / len(grams_r) if grams_r else 0.0
    return {"p": p, "r": r, "f1": f1, "shingle_f1": 2 * sp * sr / (sp + sr) if sp + sr else 0.0}


def extractors() -> dict[str, Callable[[str], str]]:
    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text

    ours, first_pass = ExtractConfig(), ExtractConfig(extractor="resiliparse")
    fast = ExtractConfig(extractor="trafilatura")
    return {
        "ours": lambda html: extract_main_text(html, ours),
        "ours_resiliparse": lambda html: extract_main_text(html, first_pass),
        "ours_trafilatura_fast": lambda html: extract_main_text(html, fast),
        "trafilatura": lambda html: trafilatura.extract(html, include_comments=False) or "",
        "resiliparse_defaults": lambda html: extract_plain_text(html, main_content=True),
    }


def run_interleaved(
    pages: list[dict], chosen: dict[str, Callable[[str], str]]
) -> tuple[dict[str, list[str]], dict[str, float]]:
    """Every extractor on page 1, then every extractor on page 2, ...: a load change on the
    shared machine hits all of them alike, so the speed ratios stay fair."""
    texts: dict[str, list[str]] = {name: [] for name in chosen}
    seconds = dict.fromkeys(chosen, 0.0)
    for page in pages:
        for name, extract in chosen.items():
            started = time.perf_counter()
            texts[name].append(extract(page["html"]))
            seconds[name] += time.perf_counter() - started
    return texts, seconds


def summarize(pages: list[dict], texts: list[str], seconds: float) -> dict:
    out: dict = {"pages_per_s": round(len(pages) / seconds, 1)}
    for name in ("dev", "heldout", "all"):
        rows = [
            scores(text, page["text"])
            for text, page in zip(texts, pages, strict=True)
            if name == "all" or half(page["id"]) == name
        ]
        out[name] = {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=None, help="extractor names to run")
    args = parser.parse_args()
    if not GOLD.exists():
        raise SystemExit(f"{GOLD} is not present: nothing to measure")
    pages = load_pages(args.limit)
    results: dict = {"pages": len(pages), "dev_pages": sum(half(p["id"]) == "dev" for p in pages)}
    print(f"{'extractor':<22} {'pages/s':>8} {'F1 dev':>7} {'F1 held':>7} {'P':>6} {'R':>6} "
          f"{'shingleF1':>9}")  # fmt: skip
    chosen = {n: f for n, f in extractors().items() if not args.only or n in args.only}
    texts, seconds = run_interleaved(pages, chosen)
    for name in chosen:
        r = results[name] = summarize(pages, texts[name], seconds[name])
        a = r["all"]
        print(f"{name:<22} {r['pages_per_s']:>8} {r['dev']['f1']:>7} {r['heldout']['f1']:>7} "
              f"{a['p']:>6} {a['r']:>6} {a['shingle_f1']:>9}", flush=True)  # fmt: skip
    if "trafilatura" in results:
        base = results["trafilatura"]
        for name in [n for n in results if n.startswith("ours") and isinstance(results[n], dict)]:
            results[name]["speedup_vs_trafilatura"] = round(
                results[name]["pages_per_s"] / base["pages_per_s"], 2
            )
            results[name]["f1_minus_trafilatura"] = round(
                results[name]["all"]["f1"] - base["all"]["f1"], 4
            )
    print(json.dumps({"bench": "extraction_quality", **results}))


if __name__ == "__main__":
    main()
