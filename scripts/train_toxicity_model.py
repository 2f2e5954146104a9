"""Build the toxicity model shipped in the package (development only: reads ../shared/data).

    .venv/bin/python scripts/train_toxicity_model.py                  # toxicity-v3, calibrated
    .venv/bin/python scripts/train_toxicity_model.py --version toxicity-v4 --no-calibrate

1. **Rows**: the ``train`` split of ``bench/_toxicity_data.py`` (nothing of ``dev`` or
   ``heldout``): Stormfront sentences (``hate`` toxic, ``noHate`` clean; ``relation`` sentences,
   hateful with the rest of their post, toxic) and its posts of two or more sentences (toxic
   when one is), Davidson tweets (hate speech and offensive language toxic), HateCheck cases,
   ToxiGen seed statements (four times: 416 statements among 50,000 rows), the sentences of
   Wikipedia articles as clean prose (without them a third of Reuters' political stories had
   a sentence over 0.5), and, twice, our own neutral and supportive sentences about 31 groups
   (``scripts/_neutral_group_frames.py``: 48 frames, each filled with every group), so that
   naming a group is not itself a sign of hate. Each row as ``to_line`` writes it, cut to
   ``MAX_WORDS`` words, shuffled with a fixed seed.
2. **Sentence model**: fastText supervised, word bigrams and character 3-5-grams (spelling
   variants, unseen words), dim 20, 40,000 hash buckets, 5 epochs, one thread, seed 0;
   quantized without re-training and without ``qnorm`` (which cost a third of the Stormfront
   recall at equal false positives) to a ~1.8 MB ``.ftz``. Deterministic: the same data give
   the same file (toxicity-v3's is toxicity-v2's, byte for byte).
3. **Document model** (``document_rows``): whole threads, pages and statements of the same
   ``train`` units, with Wikipedia, Gutenberg books and threads of neutral statements about
   groups as clean documents; word bigrams, no character n-grams, 200,000 buckets, the first
   ``MAX_DOCUMENT_WORDS`` words of a row; quantized to ~3 MB ``<version>.document.ftz``. The
   filter drops a document it scores from ``document_threshold`` when one sentence is evidence
   (``pretrain/filters/toxicity.py``): a forum thread of hate is often hateful as a whole while
   no single sentence is.
4. **Calibration** (``--calibrate``, default): the filter with the candidate models on the
   ``dev`` documents of ``bench/_toxicity_sets.py``; every setting of ``GRID``
   (``shipped_threshold``, the profanity model's ``sentence_threshold``,
   ``min_toxic_sentences``, ``document_threshold``, ``document_evidence_threshold``) is tried,
   and the one with the best mean dev recall (forum threads of 10 and 30 posts, forum pages,
   implicit hate) among those with at most ``MAX_WEB`` of web pages and of the installed
   packages' READMEs, at most ``MAX_NEUTRAL_GROUP`` of the threads of ten neutral statements
   about groups, and no violent or political news, news page or book flagged is written to
   the card. ``ToxicityConfig``'s defaults must equal it (a test checks).
5. **Output**: ``pretrain/filters/models/<version>.ftz``, ``<version>.document.ftz`` and
   ``<version>.json`` (the card: data files with sha256 and licence, row counts, parameters of
   both models, thresholds, dev numbers).

Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "scripts")]

from _neutral_group_frames import neutral_group_sentences  # noqa: E402
from _toxicity_data import (  # noqa: E402
    DATA,
    LABELLED_FILES,
    WIKIPEDIA,
    davidson_blocks,
    file_sha256,
    hatecheck_rows,
    labelled,
    read,
    split_of,
    stormfront_blocks,
    wikipedia_pages,
)
from _toxicity_sets import forum_page, group_statements, post_text  # noqa: E402

from pretrain.fasttext_models import zero_filled_allocations  # noqa: E402
from pretrain.filters.toxicity import split_sentences  # noqa: E402
from pretrain.filters.toxicity_classifier import CLEAN, TOXIC, to_line  # noqa: E402
from pretrain.filters.toxicity_model import MODELS_DIR, document_line  # noqa: E402

PARAMS = {"epoch": 5, "lr": 0.3, "dim": 20, "wordNgrams": 2, "minn": 3, "maxn": 5,
          "bucket": 40_000, "minCount": 1, "thread": 1, "seed": 0}  # fmt: skip
QUANTIZE = {"qnorm": False, "retrain": False, "cutoff": 0, "dsub": 2}
TOXIGEN_COPIES = 4
MAX_WORDS = 200  # a row's words kept (the filter scores sentences; fastText diverged on longer)
NEUTRAL_COPIES = 2  # our own neutral sentences about groups (_neutral_group_frames), twice
DOCUMENT_PARAMS = {"epoch": 5, "lr": 0.3, "dim": 20, "wordNgrams": 2, "minn": 0, "maxn": 0,
                   "bucket": 200_000, "minCount": 2, "thread": 1, "seed": 0}  # fmt: skip
MAX_DOCUMENT_WORDS = 400  # a document row's words kept (its start: a thread's first posts)
STATEMENT_THREADS = 400  # toxic threads of 10 statements, 4-5 of them implicit hate
NEUTRAL_THREADS = 4000  # clean threads of 3-10 neutral statements about groups
GRID = {"shipped_threshold": (0.8, 0.9),
        "sentence_threshold": (0.5,),
        "min_toxic_sentences": (2, 3),
        "document_threshold": (None, 0.8, 0.85, 0.9, 0.95, 0.98),
        "document_evidence_threshold": (0.2, 0.3, 0.5)}  # fmt: skip
MAX_WEB = 0.015  # dev web pages flagged, at most
# dev threads of ten neutral statements about groups flagged, at most. toxicity-v2 (sentences
# only) was held to 0.2; the document model reads a thread about groups as a whole, and at 0.3
# the best setting kept 0.81 of the dev 10-post forum threads and 0.50 of implicit statements,
# at 0.4 0.92 and 0.68 (the issue asks 0.85 of both): the recall is bought with this share
MAX_NEUTRAL_GROUP = 0.4
RECALL_SETS = ("stormfront_threads", "stormfront_threads_30_posts", "stormfront_forum_pages",
               "implicit_hate_statements", "implicit_hate_threads")  # fmt: skip
ZERO_SETS = ("violent_news", "political_news", "news_pages", "gutenberg_books")
WEB_SETS = ("clean_web", "package_docs")  # at most MAX_WEB flagged
LICENCES = {
    "stormfront_hate_speech_10944.jsonl.gz": "CC BY-SA 3.0 ES (de Gibert et al., ALW2 2018)",
    "davidson_twitter_hate_offensive_24783.jsonl.gz": "MIT (Davidson et al., ICWSM 2017)",
    "hatecheck_functional_tests_3728.jsonl.gz": "CC BY 4.0 (Röttger et al., ACL 2021)",
    "toxigen_seed_statements_624.jsonl.gz": "CDLA-Permissive-2.0 (Hartvigsen et al., ACL 2022)",
    WIKIPEDIA.name: "CC BY-SA 3.0 (Wikipedia contributors)",
    "nltk_gutenberg_selections_2008.jsonl.gz": "public domain (Project Gutenberg texts)",
}
GUTENBERG = DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"


def training_rows() -> tuple[list[tuple[bool, str]], dict[str, int]]:
    """(toxic?, text) rows of the ``train`` split, and their counts per kind."""
    rows: list[tuple[bool, str, str]] = []
    for r in labelled():
        if r["split"] == "train":
            copies = TOXIGEN_COPIES if r["source"] == "toxigen" else 1
            rows += [(r["toxic"], r["text"], r["source"])] * copies
    for _, split, posts in stormfront_blocks():
        if split != "train":
            continue
        for _, sentences in posts:
            hateful = [s["label"] in ("hate", "relation") for s in sentences]
            rows += [(True, s["text"], "stormfront_relation")
                     for s in sentences if s["label"] == "relation"]  # fmt: skip
            if len(sentences) > 1:
                post = " ".join(s["text"] for s in sentences)
                rows.append((any(hateful), post, "stormfront_posts"))
    for _, split, paragraphs in wikipedia_pages():
        if split == "train":
            for paragraph in paragraphs:
                rows += [(False, s, "wikipedia") for s in split_sentences(paragraph)
                         if len(s.split()) >= 3]  # fmt: skip
    rows += [(False, s, "own_neutral_group") for s in neutral_group_sentences()] * NEUTRAL_COPIES
    rows = [r for r in rows if to_line(r[1])]  # fastText turns an empty line into NaN
    counts: dict[str, int] = {}
    for toxic, _, source in rows:
        key = f"{source}_{'toxic' if toxic else 'clean'}"
        counts[key] = counts.get(key, 0) + 1
    return [(t, x) for t, x, _ in rows], dict(sorted(counts.items()))


def document_rows() -> tuple[list[tuple[bool, str]], dict[str, int]]:
    """(toxic?, text) whole documents of the ``train`` split for the document model.

    Toxic: Stormfront threads of 5, 10 and 30 posts (and the 10-post ones as forum pages),
    Davidson 10-tweet threads, implicit-hate statements (three times) and threads of 10
    statements of which 4-5 are implicit hate. Clean: threads of 3-10 neutral statements about
    groups (ToxiGen, HateCheck's non-hateful cases, our own frames), the statements themselves,
    Davidson's clean tweets of a thread, Wikipedia articles in pieces of 6 paragraphs and
    300-word pieces of the ``train`` Gutenberg books (public domain), so that prose, poetry and
    talk about groups are not what the model learns as hate.
    """
    rng = random.Random(0)
    rows: list[tuple[bool, str, str]] = []
    for _, split, posts in stormfront_blocks():
        if split != "train":
            continue
        for size in (5, 10, 30):
            for start in range(0, len(posts), size):
                chunk = posts[start : start + size]
                rows.append(
                    (True, "\n\n".join(post_text(p) for _, p in chunk), "stormfront_threads")
                )
                if size == 10:
                    rows.append((True, forum_page(chunk), "stormfront_pages"))
    for _, split, tweets in davidson_blocks():
        if split == "train":
            rows.append((True, "\n\n".join(r["text"] for r in tweets), "davidson_threads"))
            clean = [r["text"] for r in tweets if not r["toxic"]]
            if clean:
                rows.append((False, "\n\n".join(clean), "davidson_clean_tweets"))
    hate, neutral = group_statements()
    hateful = [r["text"] for r in hate if r["split"] == "train"]
    calm = [r["text"] for r in neutral if r["split"] == "train"]
    calm += [r["text"] for r in hatecheck_rows() if r["split"] == "train" and not r["toxic"]
             and r["functionality"] not in ("ident_neutral_nh", "ident_pos_nh")]  # fmt: skip
    calm += neutral_group_sentences()
    rows += [(True, t, "implicit_statements") for t in hateful] * 3
    rows += [(False, t, "neutral_statements") for t in calm]
    for _ in range(STATEMENT_THREADS):
        k = rng.randint(4, 5)
        posts = rng.sample(hateful, k) + rng.sample(calm, 10 - k)
        rng.shuffle(posts)
        rows.append((True, "\n\n".join(posts), "implicit_threads"))
    for _ in range(NEUTRAL_THREADS):
        rows.append((False, "\n\n".join(rng.sample(calm, rng.randint(3, 10))), "neutral_threads"))
    for _, split, paragraphs in wikipedia_pages():
        if split == "train":
            for start in range(0, len(paragraphs), 6):
                rows.append((False, "\n\n".join(paragraphs[start : start + 6]), "wikipedia"))
    for book in read(GUTENBERG):
        if split_of(book["id"]) != "train":
            continue
        words = book["text"].split()
        starts = list(range(0, max(1, len(words) - 300), 300))
        rng.shuffle(starts)
        rows += [(False, " ".join(words[s : s + 300]), "gutenberg") for s in starts[:250]]
    rows = [r for r in rows if document_line(r[1])]
    counts: dict[str, int] = {}
    for toxic, _, source in rows:
        key = f"{source}_{'toxic' if toxic else 'clean'}"
        counts[key] = counts.get(key, 0) + 1
    return [(t, x) for t, x, _ in rows], dict(sorted(counts.items()))


def train(
    rows: list[tuple[bool, str]], out: Path, params: dict, max_words: int,
    line: Callable[[str], str] = to_line,
) -> None:  # fmt: skip
    import fasttext

    lines = [f"{TOXIC if t else CLEAN} {' '.join(line(x).split()[:max_words])}" for t, x in rows]
    random.Random(0).shuffle(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        # fastText with one thread leaves most of its input matrix uninitialized: zero-filled
        # allocations make that part zeros in any process (pretrain/fasttext_models.py)
        with zero_filled_allocations():
            model = fasttext.train_supervised(input=str(path), verbose=0, **params)
            model.quantize(input=str(path), thread=1, verbose=0, **QUANTIZE)
        model.save_model(str(out))


class _Memo:
    """A candidate model whose probabilities are computed once for the whole grid."""

    def __init__(self, model: Any) -> None:
        self.model, self.cache, self.lines, self.documents = model, {}, {}, {}
        self.version, self.languages, self.card = model.version, model.languages, model.card
        self.has_document_model = model.has_document_model

    @staticmethod
    def _memo(cache: dict, score: Any, texts: list[str]) -> list[float]:
        new = [t for t in dict.fromkeys(texts) if t not in cache]
        if new:
            cache.update(zip(new, score(new), strict=True))
        return [cache[t] for t in texts]

    def probabilities(self, texts: list[str]) -> list[float]:
        return self._memo(self.cache, self.model.probabilities, texts)

    def probabilities_of_words(self, words: list[list[str]]) -> list[float]:
        lines = [" ".join(w) for w in words]  # the filter's form: a sentence's word tokens
        return self._memo(self.lines, lambda new: self.model.probabilities_of_words(
            [line.split() for line in new]), lines)  # fmt: skip

    def document_probabilities(self, texts: list[str]) -> list[float]:
        return self._memo(self.documents, self.model.document_probabilities, texts)


def calibrate(model_path: Path, document_path: Path, card: dict) -> tuple[dict, dict]:
    """The grid on the dev documents: (chosen settings, dev numbers at them)."""
    import fasttext
    from _toxicity_sets import toxicity_sets

    from pretrain.filters.langid import predict
    from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
    from pretrain.filters.toxicity_model import ShippedModel

    candidate = _Memo(ShippedModel(fasttext.load_model(str(model_path)), card,
                                   fasttext.load_model(str(document_path))))  # fmt: skip
    sets = {name: docs for name, (_, docs) in toxicity_sets().items()
            if name in RECALL_SETS + ZERO_SETS + WEB_SETS + ("neutral_group_threads",)}  # fmt: skip
    for docs in sets.values():
        docs[:] = [d for d in docs if d["split"] == "dev"]
        for doc, (language, _) in zip(docs, predict([d["text"] for d in docs]), strict=True):
            doc["language"] = language
    results = []
    for values in itertools.product(*GRID.values()):
        settings = dict(zip(GRID, values, strict=True))
        if (
            settings["document_threshold"] is None
            and settings["document_evidence_threshold"] != (GRID["document_evidence_threshold"][0])
        ):
            continue  # without the document model its evidence bar changes nothing
        rule = ToxicityFilter(ToxicityConfig(**settings), shipped=candidate)
        shares = {}
        for name, docs in sets.items():
            rule.score_batch(docs)
            shares[name] = round(sum(rule.check(d) is not None for d in docs) / len(docs), 4)
        allowed = all(shares[n] <= MAX_WEB for n in WEB_SETS) and all(
            shares[n] == 0 for n in ZERO_SETS
        )
        recall = round(sum(shares[n] for n in RECALL_SETS) / len(RECALL_SETS), 4)
        results.append({**settings, "mean_recall": recall, "allowed": allowed, **shares})
        print(json.dumps(results[-1]), flush=True)
    allowed = [r for r in results if r["allowed"]]
    if not allowed:
        raise SystemExit("no setting keeps the news, the books and the web clean on dev")
    fair = [r for r in allowed if r["neutral_group_threads"] <= MAX_NEUTRAL_GROUP]
    # the best recall among the fair ones; if none is fair, the least unfair (then best recall)
    best = max(fair or allowed, key=lambda r: (-r["neutral_group_threads"] * (not fair),
                                               r["mean_recall"]))  # fmt: skip
    return {k: best[k] for k in GRID}, {k: v for k, v in best.items() if k not in GRID}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="toxicity-v3")
    parser.add_argument("--no-calibrate", dest="calibrate", action="store_false")
    args = parser.parse_args()
    start = time.perf_counter()
    rows, counts = training_rows()
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    model_path = MODELS_DIR / f"{args.version}.ftz"
    train(rows, model_path, PARAMS, MAX_WORDS)
    document_rows_, document_counts = document_rows()
    document_path = MODELS_DIR / f"{args.version}.document.ftz"
    train(document_rows_, document_path, DOCUMENT_PARAMS, MAX_DOCUMENT_WORDS, document_line)
    data = [{"file": p.name, "sha256": file_sha256(p), "licence": LICENCES[p.name]}
            for p in (*LABELLED_FILES, WIKIPEDIA, GUTENBERG)]  # fmt: skip
    card = {
        "version": args.version,
        "languages": ["en"],
        "licence": "CC BY-SA 3.0 (share-alike of the Stormfront and Wikipedia data; see NOTICE)",
        "sha256": hashlib.sha256(model_path.read_bytes()).hexdigest(),
        "bytes": model_path.stat().st_size,
        "labels": [TOXIC, CLEAN],
        "input": "pretrain.filters.toxicity_classifier.to_line (lower-cased word tokens)",
        "training_data": data,
        "training_rows": counts,
        "split": "train units of bench/_toxicity_data.py (Stormfront 30-post blocks, Davidson "
        "10-tweet blocks, HateCheck root templates, ToxiGen ids, Wikipedia titles)",
        "fasttext": PARAMS,
        "quantize": QUANTIZE,
        "document": {
            "file": document_path.name,
            "sha256": hashlib.sha256(document_path.read_bytes()).hexdigest(),
            "bytes": document_path.stat().st_size,
            "input": "pretrain.filters.toxicity_model.document_line (links and markup removed, "
            f"then to_line) of the whole document; its first {MAX_DOCUMENT_WORDS} words in "
            "training",
            "training_rows": document_counts,
            "fasttext": DOCUMENT_PARAMS,
        },
        "built_by": "scripts/train_toxicity_model.py",
    }
    card_path = model_path.with_suffix(".json")
    card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.calibrate:  # (the card above already names the version for ToxicityConfig)
        card["thresholds"], card["dev"] = calibrate(model_path, document_path, card)
        card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(json.dumps({"script": "train_toxicity_model", "version": args.version,
                      "bytes": card["bytes"], "sha256": card["sha256"], "rows": len(rows),
                      "document": {k: card["document"][k] for k in ("bytes", "sha256")},
                      "thresholds": card.get("thresholds"), "dev": card.get("dev"),
                      "wall_s": round(time.perf_counter() - start, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
