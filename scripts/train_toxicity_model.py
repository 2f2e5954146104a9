"""Build the toxicity model shipped in the package (development only: reads ../shared/data).

    .venv/bin/python scripts/train_toxicity_model.py                  # select, train: toxicity-v4
    .venv/bin/python scripts/train_toxicity_model.py --recipe fasttext_sentences   # one recipe

1. **Rows** (``training_rows``): the ``train`` split of ``bench/_toxicity_data.py`` (nothing
   of ``dev`` or ``heldout``): Stormfront sentences (``hate`` toxic, ``noHate`` clean;
   ``relation`` sentences toxic) and its posts of two or more sentences (toxic when one is),
   Davidson tweets (hate speech and offensive language toxic, ``neither`` clean), HateCheck
   cases (hateful toxic, non-hateful clean), ToxiGen seed statements (hate toxic, neutral
   clean; four times: 416 statements among 50,000 rows), the sentences of Wikipedia articles
   as clean prose, and, twice, our own neutral sentences about 31 groups
   (``scripts/_neutral_group_frames.py``). Every source brings its clean posts with its toxic
   ones, so that a register (a tweet, a forum post) is not what the model learns as toxic.
2. **Selection by leave-one-source-out** (``bench/_toxicity_loso.py``,
   :mod:`pretrain.filters.toxicity_selection`): for every recipe of
   ``RECIPES`` and every fold, a model is trained without the fold's sources; for every rule
   of ``RULES`` its threshold is calibrated on clean text only (the dev four fifths of the
   Common Crawl pages, package READMEs, books, Wikipedia: ``BOUNDS``), and its recall is
   measured on the left-out source. The recipe and rule with the best *worst* held-out recall
   (then the best mean) are shipped. Each recipe's reach (worst and mean held-out recall) and
   file size go to the card; its training seconds and sentences scored per second to the
   output (timings would keep a rerun from writing the same card).
   The filter loads fastText files only: were the character n-gram family to win, its scoring
   (``scripts/_char_ngram_model.py``) would first have to move into the package, and the
   script stops instead of shipping it.
3. **The shipped model**: the chosen recipe trained on every source's ``train`` rows (fastText
   quantized without ``qnorm``, one thread, seed 0, zero-filled allocations: a rerun writes
   the same bytes), its threshold calibrated for the chosen rule on the same clean sets.
4. **Output**: ``pretrain/filters/models/<version>.ftz`` and ``<version>.json`` (the card:
   data files with sha256 and licence, row counts, parameters, thresholds, the selection).
   ``ToxicityConfig``'s defaults must equal the card's thresholds (a test checks).

Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "scripts")]

from _char_ngram_model import CharNgramModel  # noqa: E402
from _neutral_group_frames import neutral_group_sentences  # noqa: E402
from _toxicity_data import (  # noqa: E402
    LABELLED_FILES,
    WIKIPEDIA,
    file_sha256,
    labelled,
    stormfront_blocks,
    wikipedia_pages,
)
from _toxicity_loso import FOLDS, Selection, evidence_sets  # noqa: E402

from pretrain.fasttext_models import zero_filled_allocations  # noqa: E402
from pretrain.filters.toxicity_classifier import CLEAN, TOXIC, to_line  # noqa: E402
from pretrain.filters.toxicity_evidence import split_sentences  # noqa: E402
from pretrain.filters.toxicity_model import MODELS_DIR, ShippedModel  # noqa: E402
from pretrain.filters.toxicity_selection import rules  # noqa: E402

PARAMS = {"epoch": 5, "lr": 0.3, "dim": 20, "wordNgrams": 2, "minn": 3, "maxn": 5,
          "bucket": 40_000, "minCount": 1, "thread": 1, "seed": 0}  # fmt: skip
QUANTIZE = {"qnorm": False, "retrain": False, "cutoff": 0, "dsub": 2}
# name -> how to train a candidate (the selection tries each; fastText files are quantized)
RECIPES: dict[str, dict[str, Any]] = {
    "fasttext_sentences": {"family": "fasttext", "params": PARAMS, "quantize": QUANTIZE},
    "fasttext_sentences_dim50": {"family": "fasttext", "quantize": {**QUANTIZE, "dsub": 4},
                                 "params": {**PARAMS, "dim": 50, "epoch": 10}},
    "char_ngrams_linear": {"family": "char_ngrams", "c": 16.0, "bits": 18},
}  # fmt: skip
TOXIGEN_COPIES = 4
MAX_WORDS = 200  # a row's words kept (the filter scores sentences; fastText diverged on longer)
NEUTRAL_COPIES = 2  # our own neutral sentences about groups (_neutral_group_frames), twice
LICENCES = {
    "stormfront_hate_speech_10944.jsonl.gz": "CC BY-SA 3.0 ES (de Gibert et al., ALW2 2018)",
    "davidson_twitter_hate_offensive_24783.jsonl.gz": "MIT (Davidson et al., ICWSM 2017)",
    "hatecheck_functional_tests_3728.jsonl.gz": "CC BY 4.0 (Röttger et al., ACL 2021)",
    "toxigen_seed_statements_624.jsonl.gz": "CDLA-Permissive-2.0 (Hartvigsen et al., ACL 2022)",
    WIKIPEDIA.name: "CC BY-SA 3.0 (Wikipedia contributors)",
}


def training_rows(left_out: frozenset[str] = frozenset()) -> tuple[list[tuple[bool, str]], dict]:
    """(toxic?, text) rows of the ``train`` split without the ``left_out`` sources, and their
    counts per kind."""
    rows: list[tuple[bool, str, str]] = []
    for r in labelled():
        if r["split"] == "train" and r["source"] not in left_out:
            copies = TOXIGEN_COPIES if r["source"] == "toxigen" else 1
            rows += [(r["toxic"], r["text"], r["source"])] * copies
    for _, split, posts in stormfront_blocks() if "stormfront" not in left_out else ():
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


def train_fasttext(rows: list[tuple[bool, str]], out: Path, recipe: dict) -> None:
    import fasttext

    lines = [f"{TOXIC if t else CLEAN} {' '.join(to_line(x).split()[:MAX_WORDS])}" for t, x in rows]
    random.Random(0).shuffle(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        # fastText with one thread leaves most of its input matrix uninitialized: zero-filled
        # allocations make that part zeros in any process (pretrain/fasttext_models.py)
        with zero_filled_allocations():
            model = fasttext.train_supervised(input=str(path), verbose=0, **recipe["params"])
            model.quantize(input=str(path), thread=1, verbose=0, **recipe["quantize"])
        model.save_model(str(out))


class Candidate:
    """A trained candidate as the filter reads it: P(toxic) of sentences' word tokens."""

    def __init__(self, name: str, rows: list[tuple[bool, str]], folder: Path) -> None:
        recipe = RECIPES[name]
        start = time.perf_counter()
        if recipe["family"] == "fasttext":
            import fasttext

            self.path = folder / f"{name}.ftz"
            train_fasttext(rows, self.path, recipe)
            model = fasttext.load_model(str(self.path))
            from pretrain.filters.toxicity_classifier import ToxicityClassifier

            self.probabilities_of_words = ToxicityClassifier(model).probabilities_of_words
            self.bytes = self.path.stat().st_size
        else:
            lines = [" ".join(to_line(x).split()[:MAX_WORDS]) for _, x in rows]
            char = CharNgramModel.train(lines, [t for t, _ in rows], c=recipe["c"],
                                        bits=recipe["bits"])  # fmt: skip
            self.probabilities_of_words = char.probabilities_of_words
            self.bytes = char.bytes_as_float16
        self.train_s = round(time.perf_counter() - start, 1)


def select(names: list[str], folder: Path) -> Selection:
    """Every recipe through every fold and rule (``bench/_toxicity_loso.py``)."""
    selection = Selection(evidence_sets(), rules())
    for name in names:
        for fold, (left_out, _) in FOLDS.items():
            candidate = Candidate(name, training_rows(left_out)[0], folder)
            selection.add(name, fold, candidate)
            print(json.dumps({"recipe": name, "fold": fold, **selection.fold_summary(name, fold)}),
                  flush=True)  # fmt: skip
    return selection


def card_of(version: str, path: Path, counts: dict, recipe: str) -> dict:
    data = [{"file": p.name, "sha256": file_sha256(p), "licence": LICENCES[p.name]}
            for p in (*LABELLED_FILES, WIKIPEDIA)]  # fmt: skip
    return {
        "version": version,
        "languages": ["en"],
        "licence": "CC BY-SA 3.0 (share-alike of the Stormfront and Wikipedia data; see NOTICE)",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "bytes": path.stat().st_size,
        "labels": [TOXIC, CLEAN],
        "input": "pretrain.filters.toxicity_classifier.to_line (lower-cased word tokens) of a "
        "sentence; the filter lets it read only sentences of English documents that do not look "
        "like another language (pretrain.filters.toxicity_evidence.looks_foreign)",
        "training_data": data,
        "training_rows": counts,
        "split": "train units of bench/_toxicity_data.py (Stormfront 30-post blocks, Davidson "
        "10-tweet blocks, HateCheck root templates, ToxiGen ids, Wikipedia titles)",
        "recipe": {"name": recipe, **RECIPES[recipe]},
        "built_by": "scripts/train_toxicity_model.py",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="toxicity-v4")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default=None,
                        help="select among this recipe only (its rule still by leave-one-source-out)")  # fmt: skip
    args = parser.parse_args()
    import fasttext

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        names = [args.recipe] if args.recipe else list(RECIPES)
        selection = select(names, Path(tmp))
        recipe, rule = selection.best()
        if RECIPES[recipe]["family"] != "fasttext":
            raise SystemExit(f"{recipe} won; only fastText recipes ship (see the module doc)")
        rows, counts = training_rows()
        MODELS_DIR.mkdir(parents=True, exist_ok=True)
        path = MODELS_DIR / f"{args.version}.ftz"
        train_fasttext(rows, path, RECIPES[recipe])
        card = card_of(args.version, path, counts, recipe)
        card["thresholds"], card["calibration"] = selection.calibrate_final(
            ShippedModel(fasttext.load_model(str(path)), card), rule
        )
        card["selection"] = selection.report(recipe, rule)
    card_path = path.with_suffix(".json")
    card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({"script": "train_toxicity_model", "version": args.version,
                      "recipe": recipe, "bytes": card["bytes"], "sha256": card["sha256"],
                      "rows": len(rows), "thresholds": card["thresholds"],
                      "worst_held_out": card["selection"]["shipped"]["worst"],
                      "recipes": card["selection"]["recipes"], "timings": selection.timings(),
                      "wall_s": round(time.perf_counter() - start, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
