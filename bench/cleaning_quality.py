"""Cleaning quality on labelled real data: toxicity, PII, text kept, languages — ours vs baselines.

    .venv/bin/python bench/cleaning_quality.py [--pii-per-type 300] [--news 10788] [--cjk 2000]

Toxicity (``bench/cleaning_toxicity.py``, run from here): recall with each toxic source left
out of training (Stormfront forum threads and pages, Twitter threads, HateCheck, ToxiGen,
implicit hate), false positives on 1,600 clean web pages the rule was never tuned on, violent
and political news, news pages and books, for the shipped model's filter (``ours``) against
toxicity-v3, the filter before it and 20 profane words.

PII (``bench/_pii_generator.py``): recall per kind on planted values in international formats
— in the text, and in a document's ``url`` and ``metadata`` (masked as the filter stage masks
them, ``pretrain/filters/pii_fields.py``) — and the share of decoys changed at all (checksum
look-alikes, ID-shaped numbers, real-looking URL ids and metadata), for ``ours``; ``old`` (the
regex version of commit ``447f740``) and ``naive`` (one loose regex per type) on the text
kinds, and ``before`` (the detectors of commit ``1afb2f7``, before issue 26) on the text
kinds. ``ours`` and ``before`` count a value as masked only when none of its tokens is left
*and* the placeholder of its own type is there (an IBAN masked as ``<PHONE>`` is a miss);
``ours_any_placeholder``, ``old`` and ``naive`` only ask that the value is gone. Also counted:
phone false positives in all Reuters stories, and how many real URLs (Common Crawl, Dragnet)
the column masking changes.

Text kept and languages (``bench/cleaning_text_kept.py``, run from here): the share of
characters kept of hard-wrapped Reuters stories and Gutenberg books, and the share of short
CJK texts that get a language, for the old pipeline vs the new defaults with and without
source profiles.

Ends with one JSON line holding all of it and which targets are met. Filter throughput vs
datatrove: ``bench/filter_vs_datatrove.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import types
from pathlib import Path
from urllib.parse import quote, unquote

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _pii_generator import EXPECTED, planted_documents  # noqa: E402
from _toxicity_sets import DATA  # noqa: E402
from cleaning_text_kept import text_kept_report  # noqa: E402
from cleaning_toxicity import print_report as print_toxicity  # noqa: E402
from cleaning_toxicity import run as run_toxicity  # noqa: E402

from pretrain.filters.pii import PiiConfig, mask_pii  # noqa: E402
from pretrain.filters.pii_fields import mask_columns, mask_url  # noqa: E402

OLD_COMMIT = "447f740"
PII_BEFORE_COMMIT = "1afb2f7"  # the PII detectors before issue 26 (text only, no precedence)
NAIVE = {
    "email": r"\S+@\S+\.\w+",
    "phone": r"\+?\(?\d[\d ().-]{6,}\d",
    "ipv4": r"\d{1,3}(?:\.\d{1,3}){3}",
    "ipv6": r"[0-9a-fA-F]*:[0-9a-fA-F:]*:[0-9a-fA-F:.%\w]*",
    "card": r"\d[\d -]{11,}\d",
    "iban": r"[A-Z]{2}\d{2}[A-Z0-9 ]{10,}[A-Z0-9]",
}


def old_module(path: str, name: str, commit: str = OLD_COMMIT) -> types.ModuleType | None:
    """The file as it was at ``commit``, imported under ``name`` (None without git history)."""
    try:
        source = subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)  # noqa: S102
    return module


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^0-9A-Za-z]+", text) if len(t) >= 3}


def _core(kind: str, value: str) -> str:
    if kind.startswith("ipv4"):
        return value.strip("[]").split("]")[0].split(":")[0]
    if kind == "ipv6" and value.startswith("["):
        return value[1 : value.index("]")]
    return value


def _gone(doc: dict, out: str) -> bool:
    """The planted value is no longer in ``out``: neither whole nor percent-encoded, nor any
    token of it (3+ characters) that the rest of the document does not hold anyway."""
    column = doc["column"]
    core = _core(doc["kind"].split("_", 1)[-1] if column != "text" else doc["kind"], doc["value"])
    rest = doc[column]
    for form in (doc["value"], quote(doc["value"], safe=""), core, quote(core, safe="")):
        rest = rest.replace(form, " ")
    tokens = _tokens(core) - _tokens(rest) - _tokens(doc["template"])
    return core not in out and quote(core, safe="") not in out and not tokens & _tokens(out)


def _mask_doc(doc: dict, config: PiiConfig) -> tuple[str, str]:
    """(the planted column before, after) with ours: text by ``mask_pii``, url and metadata by
    the filter stage's column masking."""
    if doc["column"] == "text":
        return doc["text"], mask_pii(doc["text"], config, language="en")[0]
    row = {"url": doc["url"], "metadata": doc["metadata"]}
    mask_columns(row, config, language="en")
    return doc[doc["column"]], row[doc["column"]]


def pii_report(per_type: int) -> dict:
    """Recall per kind (typed: masked with the placeholder of its type, and the value gone),
    decoys changed at all, for ours and (text kinds) the detectors before issue 26;
    value-gone rates for the old and naive text maskers."""
    docs = planted_documents(per_type=per_type)
    config = PiiConfig()
    report: dict = {"ours": {}, "ours_any_placeholder": {}}
    misses: dict[str, list[str]] = {}
    start = time.perf_counter()
    for doc in docs:
        before, out = _mask_doc(doc, config)
        kind = doc["kind"]
        if doc["decoy"]:
            hit = out != before  # anything masked in a decoy is wrong
            report["ours_any_placeholder"].setdefault(kind, []).append(int(hit))
        else:
            base = kind.split("_", 1)[1] if doc["column"] != "text" else kind
            placeholder = config.placeholder.replace("{TYPE}", EXPECTED[base].upper())
            gone = _gone(doc, out)
            hit = gone and placeholder in out
            report["ours_any_placeholder"].setdefault(kind, []).append(int(gone))
        report["ours"].setdefault(kind, []).append(int(hit))
        if hit == doc["decoy"]:
            misses.setdefault(kind, []).append(out if doc["column"] != "text" else doc["value"])
    elapsed = time.perf_counter() - start
    for method in ("ours", "ours_any_placeholder"):
        report[method] = {k: round(sum(v) / len(v), 4) for k, v in report[method].items()}
    report["ours"]["docs_per_s"] = round(len(docs) / elapsed, 1)
    report["ours_missed_examples"] = {k: v[:3] for k, v in misses.items()}
    text_docs = [d for d in docs if d["column"] == "text"]
    methods = {}
    for method, commit in (("before", PII_BEFORE_COMMIT), ("old", OLD_COMMIT)):
        module = old_module("pretrain/filters/pii.py", f"{method}_pii", commit)
        if module is not None:
            methods[method] = lambda t, m=module: m.mask_pii(t, m.PiiConfig())[0]
    naive = [re.compile(p) for p in NAIVE.values()]

    def naive_mask(text: str) -> str:
        for pattern in naive:
            text = pattern.sub("<PII>", text)
        return text

    methods["naive"] = naive_mask
    for method, mask in methods.items():
        hits: dict[str, list[int]] = {}
        start = time.perf_counter()
        for doc in text_docs:
            out = mask(doc["text"])
            hit = out != doc["text"] if doc["decoy"] else _gone(doc, out)
            if method == "before" and not doc["decoy"]:  # typed, as ours
                placeholder = config.placeholder.replace("{TYPE}", EXPECTED[doc["kind"]].upper())
                hit = hit and placeholder in out
            hits.setdefault(doc["kind"], []).append(int(hit))
        rates = {kind: round(sum(v) / len(v), 4) for kind, v in hits.items()}
        rates["docs_per_s"] = round(len(text_docs) / (time.perf_counter() - start), 1)
        report[method] = rates
    # Reuters-21578 (1987 newswire, full of prices, dates and tables) holds no phone numbers:
    # every phone it masks is a false positive.
    news = [d["text"] for d in _all_reuters()]
    report["ours_phones_masked_in_reuters"] = sum(
        mask_pii(t, PiiConfig(types=("phone",)), language="en")[1].get("phone", 0) for t in news
    )
    report["reuters_documents"] = len(news)
    report["real_urls"] = _real_urls_changed(config)
    return report


def _real_urls_changed(config: PiiConfig) -> dict:
    """Real URLs (Common Crawl pages, Dragnet's news pages) that masking changes: with the
    text's detectors on every decoded piece (as a naive column masker would) vs ours."""
    import gzip

    urls = []
    for name, get in (
        ("web/cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz",
         lambda r: r["metadata"]["warc_url"]),
        ("extraction/dragnet_test_415pages.jsonl.gz", lambda r: r["url"]),
    ):  # fmt: skip
        with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
            urls += [u for u in (get(json.loads(line)) for line in f) if u]
    naive = [u for u in urls if mask_pii(unquote(u), config, language="en")[1]]
    ours = [(u, mask_url(u, config)[0]) for u in urls if mask_url(u, config)[1]]
    return {"urls": len(urls), "changed_text_detectors": len(naive), "changed_ours": len(ours),
            "ours_changed_examples": ours[:5]}  # fmt: skip


def _all_reuters() -> list[dict]:
    from _toxicity_sets import WEB, _read

    return _read(WEB / "news" / "reuters21578_apte_nltk_10788docs.jsonl.gz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pii-per-type", type=int, default=300)
    parser.add_argument("--news", type=int, default=10788, help="Reuters stories for text kept")
    parser.add_argument("--cjk", type=int, default=2000, help="short Chinese reviews")
    args = parser.parse_args()
    if not (DATA / "toxicity").exists():
        raise SystemExit(f"{DATA} is missing: this benchmark needs ../shared/data")
    tox = run_toxicity()
    print_toxicity(tox)
    pii = pii_report(args.pii_per_type)
    print("\nPII: share of planted values masked as their type (decoys: share changed at all)")
    print(f"{'kind':22}{'ours':>8}{'ours, any mask':>16}{'before':>8}{'old':>8}{'naive':>8}")
    for kind in (k for k in pii["ours"] if k != "docs_per_s"):
        cells = "".join(
            f"{pii[m][kind]:>8.3f}" if kind in pii.get(m, {}) else f"{'n/a':>8}"
            for m in ("before", "old", "naive")
        )
        print(
            f"{kind:22}{pii['ours'][kind]:>8.3f}{pii['ours_any_placeholder'][kind]:>16.3f}{cells}"
        )
    print(f"ours: {pii['ours']['docs_per_s']} documents/s; missed:", pii["ours_missed_examples"])
    print(
        f"ours masks {pii['ours_phones_masked_in_reuters']} 'phone numbers' in "
        f"{pii['reuters_documents']} Reuters stories (none has one: all false positives)"
    )
    real = pii["real_urls"]
    print(
        f"real URLs changed: {real['changed_ours']} of {real['urls']} by ours, "
        f"{real['changed_text_detectors']} by the text's detectors on every piece"
    )
    print("\ntext kept and languages: old pipeline vs new defaults (without / with profiles)")
    kept = text_kept_report(args.news, args.cjk)
    kinds = [k for k in pii["ours"] if k != "docs_per_s"]
    recall_types = [k for k in kinds if not k.endswith("_decoy")]
    targets = {
        **tox["targets_met"],
        "pii_recall_ge_0.98_every_type": all(pii["ours"][k] >= 0.98 for k in recall_types),
        "pii_decoys_masked_le_0.02": all(
            pii["ours"][k] <= 0.02 for k in kinds if k.endswith("_decoy")
        ),
        "pii_real_urls_changed_le_0.01": real["changed_ours"] <= 0.01 * real["urls"],
        "hard_wrapped_news_chars_kept_ge_0.95": kept["new_news_char_share_kept"] >= 0.95,
        "books_chars_kept_ge_0.95": kept["new_books_char_share_kept"] >= 0.95,
    }
    print("\ntargets:", json.dumps(targets))
    print(
        json.dumps(
            {
                "bench": "cleaning_quality",
                "toxicity": {k: v for k, v in tox.items() if k != "targets_met"},
                "pii": {
                    m: pii[m]
                    for m in ("ours", "ours_any_placeholder", "before", "old", "naive")
                    if m in pii
                },
                "pii_real_urls": {k: v for k, v in real.items() if k != "ours_changed_examples"},
                "phones_masked_in_reuters": pii["ours_phones_masked_in_reuters"],
                "text_kept": kept,
                "targets_met": targets,
            }
        )
    )


if __name__ == "__main__":
    main()
