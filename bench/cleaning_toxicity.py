"""Toxicity part of ``bench/cleaning_quality.py``: held-out threads and pages, ours vs baselines.

    .venv/bin/python bench/cleaning_toxicity.py      # this part alone (cleaning_quality runs it)

Sets: ``bench/_toxicity_sets.py`` (forum threads of 10 and 30 posts, forum pages, implicit hate,
Twitter threads; clean web, violent and political news, news pages, books). Language: LID-176's
top language, as the filter stage annotates it (only the toxicity rule decides: the other rule
families are off). Methods, each the share of documents flagged ``toxic_content``:

- ``ours``: ``ToxicityFilter(ToxicityConfig())``: the shipped model (its sentence model and
  its document model), the profanity model, the word lists, the reporting rule;
- ``no_document_model``: ours without the document model (``document_threshold=None``): the
  filter as toxicity-v2 shipped it (v3's sentence model is v2's, byte for byte);
- ``previous_default``: the filter before the shipped model (profanity model, identity rule at
  0.08, word lists; no reporting rule, every sentence scored, 2 toxic sentences drop a text);
- ``identity_threshold_0.15``: ours with toxicity-v1's identity rule (a sentence naming a group
  flagged from 0.15);
- ``no_reporting_rule``: ours with the reporting rule off;
- ``own_combine`` / ``own_replace``: ours with the ``toxicity`` stage's classifier trained on
  a user's labels (``training_labels``: the non-held-out Stormfront sentences and Davidson
  tweets), added to the shipped model or replacing it;
- ``plain_20_words``: any of 20 common English profanities in the text.

Also the AUC of ``toxicity_score`` and of the document model's probability (held-out toxic documents of a set against all held-out
clean documents; an unscored document counts as 0) and the shipped model's sentence AUC on
the held-out labelled sentences of each source. Ends with one JSON line.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from _toxicity_data import labelled  # noqa: E402
from _toxicity_sets import toxicity_sets, training_labels  # noqa: E402

from pretrain.filters.langid import predict  # noqa: E402
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter  # noqa: E402
from pretrain.filters.toxicity_classifier import (  # noqa: E402
    ToxicityClassifierConfig,
    train_toxicity_classifier,
)
from pretrain.filters.toxicity_model import VERSION, load_shipped  # noqa: E402

PLAIN_WORDS = frozenset(
    "fuck fucking shit bitch cunt asshole bastard dick pussy slut whore damn crap piss cock "
    "fag nigger retard motherfucker bullshit".split()
)
RECALL_TARGETS = ("stormfront_threads", "stormfront_threads_30_posts", "implicit_hate_threads",
                  "implicit_hate_statements")  # fmt: skip
ZERO_TARGETS = ("violent_news", "political_news", "news_pages", "gutenberg_books")
PREVIOUS = {"shipped_model": None, "identity_threshold": 0.08, "reported_threshold": None,
            "min_model_words": 1, "min_toxic_sentences": 2}  # fmt: skip


def auc(positive: list[float], negative: list[float]) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    ranked = sorted([(s, 1) for s in positive] + [(s, 0) for s in negative])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        rank_sum += sum(label for _, label in ranked[i:j]) * (i + j + 1) / 2
        i = j
    n_pos, n_neg = len(positive), len(negative)
    return round((rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg), 4)


def own_classifier(folder: str) -> dict:
    labels = Path(folder) / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in training_labels()))
    config = ToxicityClassifierConfig(labelled_uris=(str(labels),))
    return asdict(train_toxicity_classifier(str(Path(folder) / "model"), config))


def sentence_aucs() -> dict[str, float]:
    """The shipped model's AUC on the held-out labelled sentences, per source."""
    model = load_shipped()
    rows = [r for r in labelled() if r["split"] == "heldout"]
    out = {}
    for source in sorted({r["source"] for r in rows}):
        mine = [r for r in rows if r["source"] == source]
        scores = model.probabilities([r["text"] for r in mine])
        out[source] = auc([s for s, r in zip(scores, mine, strict=True) if r["toxic"]],
                          [s for s, r in zip(scores, mine, strict=True) if not r["toxic"]])  # fmt: skip
    return out


def toxicity_report(folder: str) -> dict:
    ours = ToxicityFilter(ToxicityConfig())
    own = str(Path(folder) / "model")
    methods = {
        "no_document_model": ToxicityFilter(ToxicityConfig(document_threshold=None)),
        "previous_default": ToxicityFilter(ToxicityConfig(**PREVIOUS)),
        "identity_threshold_0.15": ToxicityFilter(ToxicityConfig(shipped_identity_threshold=0.15)),
        "no_reporting_rule": ToxicityFilter(ToxicityConfig(reported_threshold=None)),
        "own_combine": ToxicityFilter(ToxicityConfig(classifier_uri=own)),
        "own_replace": ToxicityFilter(ToxicityConfig(classifier_uri=own, own_model="replace")),
    }
    words = re.compile(r"\w+")
    report: dict = {"sets": {}}
    scores: dict[str, dict[str, list[float]]] = {}
    document: dict[str, list[float]] = {}  # the document model's P(toxic), held-out, English
    shipped = load_shipped()
    seconds, scored = 0.0, 0
    sets = toxicity_sets()  # built once: reading every set (Reuters, the READMEs) takes a while
    for name, (toxic, docs) in sets.items():
        docs = [d for d in docs if d["split"] in ("dev", "heldout")]
        for doc, (language, _) in zip(docs, predict([d["text"] for d in docs]), strict=True):
            doc["language"] = language
        start = time.perf_counter()
        ours.score_batch(docs)
        flagged = {"ours": [ours.check(d) is not None for d in docs]}
        seconds, scored = seconds + time.perf_counter() - start, scored + len(docs)
        scores[name] = {s: [d["toxicity_score"] or 0.0 for d in docs if d["split"] == s]
                        for s in ("dev", "heldout")}  # fmt: skip
        english = [d["text"] if d["language"] == "en" else "" for d in docs]
        document[name] = [p if t else 0.0 for p, t, d in zip(
            shipped.document_probabilities(english), english, docs, strict=True
        ) if d["split"] == "heldout"]  # fmt: skip
        for method, rule in methods.items():
            rule.score_batch(docs)
            flagged[method] = [rule.check(d) is not None for d in docs]
        flagged["plain_20_words"] = [
            any(w.lower() in PLAIN_WORDS for w in words.findall(d["text"])) for d in docs
        ]
        entry: dict = {"toxic": toxic}
        for split in ("dev", "heldout"):
            idx = [i for i, d in enumerate(docs) if d["split"] == split]
            entry[split] = {m: round(sum(f[i] for i in idx) / max(1, len(idx)), 4)
                            for m, f in flagged.items()}  # fmt: skip
            entry[split]["n"] = len(idx)
        report["sets"][name] = entry
    clean = [s for n, (t, _) in sets.items() if not t and n != "neutral_group_threads"
             for s in scores[n]["heldout"]]  # fmt: skip
    report["auc_heldout"] = {
        name: auc(scores[name]["heldout"], clean)
        for name, entry in report["sets"].items()
        if entry["toxic"]
    }
    clean_documents = [p for n, (t, _) in sets.items()
                       if not t and n != "neutral_group_threads" for p in document[n]]  # fmt: skip
    report["document_auc_heldout"] = {
        name: auc(document[name], clean_documents)
        for name, entry in report["sets"].items()
        if entry["toxic"]
    }
    report["sentence_auc_heldout"] = sentence_aucs()
    report["docs_per_s"] = round(scored / seconds, 1)
    return report


def run() -> dict:
    with tempfile.TemporaryDirectory() as folder:
        classifier = own_classifier(folder)
        tox = toxicity_report(folder)
    tox["own_classifier"] = classifier
    tox["shipped_model"] = VERSION
    sets = tox["sets"]
    held = {name: e["heldout"] for name, e in sets.items()}
    tox["targets_met"] = {
        **{f"toxicity_recall_{n}_ge_0.85": held[n]["ours"] >= 0.85 for n in RECALL_TARGETS},
        "toxicity_fp_clean_web_le_0.015": held["clean_web"]["ours"] <= 0.015,
        "toxicity_fp_neutral_group_threads_le_0.05": held["neutral_group_threads"]["ours"] <= 0.05,
        **{f"toxicity_no_{n}_flagged": sets[n]["dev"]["ours"] == held[n]["ours"] == 0
           for n in ZERO_TARGETS},
    }  # fmt: skip
    return tox


def print_report(tox: dict) -> None:
    print(f"toxicity ({tox['shipped_model']}): share of documents flagged (dev / heldout)")
    methods = [m for m in next(iter(tox["sets"].values()))["dev"] if m != "n"]
    print(f"{'set':28}{'kind':7}{'n held':>7}" + "".join(f"{m:>22}" for m in methods))
    for name, e in tox["sets"].items():
        cells = "".join(f"{e['dev'][m]:>10.3f} / {e['heldout'][m]:<9.3f}" for m in methods)
        print(f"{name:28}{'recall' if e['toxic'] else 'FP':7}{e['heldout']['n']:>7}{cells}")
    print("AUC of toxicity_score, held-out (each toxic set vs all clean sets):",
          json.dumps(tox["auc_heldout"]))  # fmt: skip
    print("AUC of the document model's probability, held-out:",
          json.dumps(tox["document_auc_heldout"]))  # fmt: skip
    print(
        "shipped model, sentence AUC on held-out labels:", json.dumps(tox["sentence_auc_heldout"])
    )
    print(f"ours scores {tox['docs_per_s']} documents/s (1 process)")
    print("own classifier trained on the non-held-out labels:", json.dumps(tox["own_classifier"]))
    print("toxicity targets:", json.dumps(tox["targets_met"]))


if __name__ == "__main__":
    result = run()
    print_report(result)
    print(json.dumps({"bench": "cleaning_toxicity", **result}))
