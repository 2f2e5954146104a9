"""Build the toxicity model shipped in the package (development only: reads ../shared/data).

    .venv/bin/python scripts/train_toxicity_model.py                  # toxicity-v2, calibrated
    .venv/bin/python scripts/train_toxicity_model.py --version toxicity-v3 --no-calibrate

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
2. **Model**: fastText supervised, word bigrams and character 3-5-grams (spelling variants,
   unseen words), dim 20, 40,000 hash buckets, 5 epochs, one thread, seed 0; quantized without
   re-training and without ``qnorm`` (which cost a third of the Stormfront recall at equal
   false positives) to a ~1.8 MB ``.ftz``. Deterministic: the same data give the same file.
3. **Calibration** (``--calibrate``, default): the filter with the candidate model on the
   ``dev`` documents of ``bench/_toxicity_sets.py``; every setting of ``GRID``
   (``shipped_threshold``, ``shipped_identity_threshold``, the profanity model's
   ``sentence_threshold``, ``min_toxic_sentences``) is tried, and the one with the best mean
   dev recall (forum threads of 10 and 30 posts, forum pages, implicit hate) among those with
   at most ``MAX_WEB`` of web pages, at most ``MAX_NEUTRAL_GROUP`` of the threads of ten
   neutral statements about groups, and no violent or political news, news page or book
   flagged is written to the card. ``ToxicityConfig``'s defaults must equal it (a test checks).
4. **Output**: ``pretrain/filters/models/<version>.ftz`` and ``<version>.json`` (the card:
   data files with sha256 and licence, row counts, parameters, thresholds, dev numbers).

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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "scripts")]

from _neutral_group_frames import neutral_group_sentences  # noqa: E402
from _toxicity_data import (  # noqa: E402
    LABELLED_FILES,
    WIKIPEDIA,
    file_sha256,
    labelled,
    stormfront_blocks,
    wikipedia_pages,
)

from pretrain.filters.toxicity import split_sentences  # noqa: E402
from pretrain.filters.toxicity_classifier import CLEAN, TOXIC, to_line  # noqa: E402
from pretrain.filters.toxicity_model import MODELS_DIR  # noqa: E402

PARAMS = {"epoch": 5, "lr": 0.3, "dim": 20, "wordNgrams": 2, "minn": 3, "maxn": 5,
          "bucket": 40_000, "minCount": 1, "thread": 1, "seed": 0}  # fmt: skip
QUANTIZE = {"qnorm": False, "retrain": False, "cutoff": 0, "dsub": 2}
TOXIGEN_COPIES = 4
MAX_WORDS = 200  # a row's words kept (the filter scores sentences; fastText diverged on longer)
NEUTRAL_COPIES = 2  # our own neutral sentences about groups (_neutral_group_frames), twice
GRID = {"shipped_threshold": (0.7, 0.8, 0.85, 0.9, 0.95),
        "shipped_identity_threshold": (0.5, None),
        "sentence_threshold": (0.5, 0.7, 0.9),
        "min_toxic_sentences": (2, 3)}  # fmt: skip
MAX_WEB = 0.015  # dev web pages flagged, at most
MAX_NEUTRAL_GROUP = 0.2  # dev threads of ten neutral statements about groups flagged, at most
# (none of GRID reached 0.05 on dev: the least, 0.06, kept a mean recall of 0.25; 0.1 kept 0.38)
RECALL_SETS = ("stormfront_threads", "stormfront_threads_30_posts", "stormfront_forum_pages",
               "implicit_hate_statements", "implicit_hate_threads")  # fmt: skip
ZERO_SETS = ("violent_news", "political_news", "news_pages", "gutenberg_books")
LICENCES = {
    "stormfront_hate_speech_10944.jsonl.gz": "CC BY-SA 3.0 ES (de Gibert et al., ALW2 2018)",
    "davidson_twitter_hate_offensive_24783.jsonl.gz": "MIT (Davidson et al., ICWSM 2017)",
    "hatecheck_functional_tests_3728.jsonl.gz": "CC BY 4.0 (Röttger et al., ACL 2021)",
    "toxigen_seed_statements_624.jsonl.gz": "CDLA-Permissive-2.0 (Hartvigsen et al., ACL 2022)",
    WIKIPEDIA.name: "CC BY-SA 3.0 (Wikipedia contributors)",
}


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


def train(rows: list[tuple[bool, str]], out: Path) -> None:
    import fasttext

    lines = [f"{TOXIC if t else CLEAN} {' '.join(to_line(x).split()[:MAX_WORDS])}" for t, x in rows]
    random.Random(0).shuffle(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for attempt in range(3):  # fastText 0.10.4 at times raises "Encountered NaN" at once
            try:  # on the same input; a run that finishes gives the same model every time
                model = fasttext.train_supervised(input=str(path), verbose=0, **PARAMS)
                break
            except RuntimeError as error:
                if "NaN" not in str(error) or attempt == 2:
                    raise
                print(f"fastText: {error} (attempt {attempt + 1}); training again", flush=True)
        model.quantize(input=str(path), thread=1, verbose=0, **QUANTIZE)
        model.save_model(str(out))


class _Memo:
    """A candidate model whose sentence probabilities are computed once for the whole grid."""

    def __init__(self, model: Any) -> None:
        self.model, self.cache = model, {}
        self.version, self.languages, self.card = model.version, model.languages, model.card

    def probabilities(self, texts: list[str]) -> list[float]:
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            self.cache.update(zip(new, self.model.probabilities(new), strict=True))
        return [self.cache[t] for t in texts]


def calibrate(model_path: Path, card: dict) -> tuple[dict, dict]:
    """The grid on the dev documents: (chosen settings, dev numbers at them)."""
    import fasttext
    from _toxicity_sets import toxicity_sets

    from pretrain.filters.langid import predict
    from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
    from pretrain.filters.toxicity_model import ShippedModel

    candidate = _Memo(ShippedModel(fasttext.load_model(str(model_path)), card))
    sets = {name: docs for name, (_, docs) in toxicity_sets().items()
            if name in RECALL_SETS + ZERO_SETS + ("clean_web", "neutral_group_threads")}  # fmt: skip
    for docs in sets.values():
        docs[:] = [d for d in docs if d["split"] == "dev"]
        for doc, (language, _) in zip(docs, predict([d["text"] for d in docs]), strict=True):
            doc["language"] = language
    results = []
    for values in itertools.product(*GRID.values()):
        settings = dict(zip(GRID, values, strict=True))
        rule = ToxicityFilter(ToxicityConfig(**settings), shipped=candidate)
        shares = {}
        for name, docs in sets.items():
            rule.score_batch(docs)
            shares[name] = round(sum(rule.check(d) is not None for d in docs) / len(docs), 4)
        allowed = shares["clean_web"] <= MAX_WEB and all(shares[n] == 0 for n in ZERO_SETS)
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
    parser.add_argument("--version", default="toxicity-v2")
    parser.add_argument("--no-calibrate", dest="calibrate", action="store_false")
    args = parser.parse_args()
    start = time.perf_counter()
    rows, counts = training_rows()
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    model_path = MODELS_DIR / f"{args.version}.ftz"
    train(rows, model_path)
    data = [{"file": p.name, "sha256": file_sha256(p), "licence": LICENCES[p.name]}
            for p in (*LABELLED_FILES, WIKIPEDIA)]  # fmt: skip
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
        "built_by": "scripts/train_toxicity_model.py",
    }
    card_path = model_path.with_suffix(".json")
    card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.calibrate:  # (the card above already names the version for ToxicityConfig)
        card["thresholds"], card["dev"] = calibrate(model_path, card)
        card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(json.dumps({"script": "train_toxicity_model", "version": args.version,
                      "bytes": card["bytes"], "sha256": card["sha256"], "rows": len(rows),
                      "thresholds": card.get("thresholds"), "dev": card.get("dev"),
                      "wall_s": round(time.perf_counter() - start, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
