"""Clean documents for the toxicity rule: a calibration part and a larger evaluation set.

No clean document here is ever trained on. The **calibration** sets are what
``scripts/train_toxicity_model.py`` holds the rule's false positives to while it calibrates
thresholds; the **evaluation** sets are never read by the script, so the rates
``bench/cleaning_toxicity.py`` reports on them are those of pages the rule was not tuned on.

Calibration (``calibration_sets``):

- ``web``: the ``dev`` four fifths of the Common Crawl pages of the dolma and CCNet-head samples
  (``_toxicity_sets.document_split``: the other fifth is ``heldout`` and belongs to evaluation);
- ``package_docs``: the ``dev`` part of the installed Python packages' READMEs and licences;
- ``books``: the ``dev`` Gutenberg books; ``wikipedia``: the ``dev`` Wikipedia articles;
- ``neutral_group_threads``: ``dev`` threads of ten neutral statements about groups.

Evaluation (``evaluation_pages``, 1,600 pages: ``kind`` says where each comes from):
the ``heldout`` Common Crawl pages (dolma, CCNet head); the 1,033 HTML pages of trafilatura's
test cache in many languages (blogs, news, forums, shops, sports, fiction, a recipe), as the
project's own extractor (:func:`pretrain.data.extract.extract_main_text`) reads them; the HTML
responses of the WARC files (Common Crawl, ClueWeb, web archives, Wikipedia); and OSCAR's
samples in 166 languages (real spam), one per distinct text. News and books are in
``_toxicity_sets`` (Reuters, the extraction set's news pages, Gutenberg).

Reads ``../shared/data`` (Common Crawl, OSCAR, the HTML and WARC pages are third-party text:
evaluation and calibration only, never training)::

    from _toxicity_clean import calibration_sets, evaluation_pages
    pages = evaluation_pages()   # [{"id", "kind", "split", "text"}, ...]
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile

from _toxicity_data import DATA, WEB, read, split_of, wikipedia_pages
from _toxicity_sets import clean_documents, clean_web, package_docs, statement_threads

HTML_PAGES = WEB / "html" / "trafilatura_tests_cache_eval_1033pages.tar.zst"
OSCAR = WEB / "oscar2019_hf_dummy_166langs.jsonl.gz"
GUTENBERG = DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"


def _html_pages() -> list[dict]:
    """The trafilatura test cache's pages as the pipeline's extractor reads them."""
    import zstandard

    from pretrain.data.encoding import decode_bytes
    from pretrain.data.extract import extract_main_text

    data = zstandard.ZstdDecompressor().stream_reader(HTML_PAGES.open("rb")).read()
    out = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            file = tar.extractfile(member) if member.isfile() else None
            decoded = decode_bytes(file.read(), None) if file is not None else None
            if decoded:
                text = extract_main_text(decoded[0])
                if text.strip():
                    out.append({"id": f"html:{member.name}", "kind": "html", "text": text})
    return out


def _warc_pages() -> list[dict]:
    from pretrain.data.records import RawFile
    from pretrain.data.warc import iter_warc

    out = []
    for path in sorted((WEB / "warc").glob("*.warc.gz")):
        for record in iter_warc(RawFile(uri=str(path), source="web", kind="warc")):
            if record.get("reason") is None and (record.get("text") or "").strip():
                url = record.get("url") or ""
                out.append(
                    {"id": f"warc:{path.name}:{url}", "kind": "warc", "text": record["text"]}
                )
    return out


def _oscar_pages() -> list[dict]:
    first: dict[str, str] = {}  # an OSCAR text often comes twice (original, deduplicated)
    with gzip.open(OSCAR, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record["text"].strip():
                first.setdefault(record["text"], record["id"])
    return [{"id": f"oscar:{i}", "kind": "oscar", "text": t} for t, i in first.items()]


def evaluation_pages() -> list[dict]:
    """Every clean evaluation page: ``id``, ``kind`` (common_crawl, html, warc, oscar),
    ``split`` ("eval") and ``text``."""
    pages = [{**d, "kind": "common_crawl"} for d in clean_web() if d["split"] == "heldout"]
    pages += _html_pages() + _warc_pages() + _oscar_pages()
    return [{**p, "split": "eval"} for p in pages]


def calibration_sets() -> dict[str, list[dict]]:
    """name -> clean documents the training script calibrates on (never evaluated on)."""
    # books and articles: their own split (the model may train on the ``train`` ones)
    books = [{**d, "split": split_of(d["id"])} for d in clean_documents(read(GUTENBERG))]
    wiki = [{"id": f"wikipedia:{title}", "split": split, "text": "\n\n".join(paragraphs)}
            for title, split, paragraphs in wikipedia_pages() if paragraphs]  # fmt: skip
    sets = {
        "web": clean_web(),
        "package_docs": package_docs(),
        "books": books,
        "wikipedia": wiki,
        "neutral_group_threads": statement_threads(hateful=0),
    }
    return {name: [d for d in docs if d["split"] == "dev"] for name, docs in sets.items()}
