"""HTML → main text: trafilatura vs resiliparse vs the built-in tag stripper, measured.

    .venv/bin/python bench/extraction_choice.py [--limit N]

Input: ``../shared/data/web/html/trafilatura_tests_cache_eval_1033pages.tar.zst`` (real pages
with boilerplate, many languages). No gold extractions ship with it, so quality is measured
by proxies that matter to this pipeline: the share of pages giving any text, the share of
extracted characters that survive our prose rules (Gopher + C4 + FineWeb, language-agnostic
stop words), and the boilerplate share (lines under 30 characters). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import io
import json
import tarfile
import time
from pathlib import Path

import zstandard

from pretrain.data.encoding import decode_bytes
from pretrain.data.extract import html_to_text
from pretrain.filters.c4_fineweb import C4Filter, FineWebFilter
from pretrain.filters.gopher import GopherQuality, GopherRepetition
from pretrain.filters.langid import predict

TAR = Path(__file__).parents[1] / ".." / "shared" / "data" / "web" / "html"
TAR = TAR / "trafilatura_tests_cache_eval_1033pages.tar.zst"


def pages(limit: int | None) -> list[str]:
    data = zstandard.ZstdDecompressor().stream_reader(TAR.open("rb")).read()
    out = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if member.isfile() and member.name.endswith((".html", ".htm")):
                raw = tar.extractfile(member).read()
                decoded = decode_bytes(raw, None)
                if decoded:
                    out.append(decoded[0])
    return out[:limit] if limit else out


def extractors() -> dict:
    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text

    return {
        "builtin_tag_stripper": html_to_text,
        "resiliparse_main_content": lambda h: extract_plain_text(h, main_content=True),
        "trafilatura": lambda h: trafilatura.extract(h, include_comments=False) or "",
    }


def surviving_chars(texts: list[str]) -> float:
    rules = [GopherRepetition(), GopherQuality(), C4Filter(), FineWebFilter()]
    langs = predict([t or " " for t in texts])
    kept = total = 0
    for text, (lang, _) in zip(texts, langs, strict=True):
        total += len(text)
        doc = {"text": text, "language": lang}
        if text and all(rule.check(doc) is None for rule in rules):
            kept += len(text)
    return kept / max(1, total)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    html = pages(args.limit)
    results = {"pages": len(html)}
    for name, extract in extractors().items():
        start = time.perf_counter()
        texts = [extract(h) for h in html]
        seconds = time.perf_counter() - start
        lines = [line for t in texts for line in t.splitlines() if line.strip()]
        results[name] = {
            "pages_per_s": round(len(html) / seconds, 1),
            "nonempty_rate": round(sum(bool(t.strip()) for t in texts) / len(texts), 4),
            "mean_chars": round(sum(map(len, texts)) / len(texts)),
            "short_line_share": round(sum(len(x) < 30 for x in lines) / max(1, len(lines)), 4),
            "chars_surviving_filters": round(surviving_chars(texts), 4),
        }
        print(name, results[name], flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
