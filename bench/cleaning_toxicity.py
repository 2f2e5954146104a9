"""Toxicity where the model was not tuned: each source held out, 1,600 clean pages, news, books.

    .venv/bin/python bench/cleaning_toxicity.py                      # about 8 minutes, 2 cores
    .venv/bin/python bench/cleaning_toxicity.py --datatrove-rounds 3  # + the chain vs datatrove (15)

Only the toxicity rule decides (the other rule families are off); a document's language is
LID-176's top language, as the filter stage annotates it. Methods, each the share of
documents flagged ``toxic_content``:

- ``loso``: the shipped recipe and rule (the card's ``selection``), **left-one-source-out**
  (``bench/_toxicity_loso.py``): for each toxic source, a model trained without it, its
  threshold calibrated on clean text only, measured on every document of that source;
- ``ours``: ``ToxicityFilter()`` as shipped (trained on every source's ``train`` split: on a
  source's ``heldout`` split it is measured in-distribution, like the releases below);
- ``v3``: the filter of the release that shipped toxicity-v3 (its sentence and document
  models), run from the repository's history (``bench/_toxicity_release.py``);
- ``before_v3``: the filter before the first shipped model (profanity model with its group
  rule at 0.08, word lists, 2 flagged sentences drop), from the same release;
- ``20_words``: any of 20 common English profanities in the text.

Reported: per toxic set, ``loso`` on all its documents and, on its ``heldout`` split, every
method; the **floor** (recall ≥ the 20-word list's, clean pages flagged ≤ its rate + 0.5
points); clean evaluation pages (``bench/_toxicity_clean.py``, never trained or calibrated
on) per kind, with **every page ours flags** (id, language, what judged it, first line); news
and books; which scorer judged the clean pages (``judged_by``); each model family's cost and
worst held-out recall (from the card); with ``--datatrove-rounds``, the full filter chain's
ratio against datatrove (``bench/filter_vs_datatrove.py``). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "scripts")]

from _toxicity_data import DATA  # noqa: E402

PLAIN_WORDS = frozenset(
    "fuck fucking shit bitch cunt asshole bastard dick pussy slut whore damn crap piss cock "
    "fag nigger retard motherfucker bullshit".split()
)
TARGET_RECALL, TARGET_CLEAN, FLOOR_MARGIN = 0.70, 0.005, 0.005
NEWS_AND_BOOKS = ("violent_news", "political_news", "news_pages", "gutenberg_books")
_WORDS = re.compile(r"\w+")


def twenty_words(docs: list[dict]) -> list[bool]:
    return [any(w.lower() in PLAIN_WORDS for w in _WORDS.findall(d["text"])) for d in docs]


def first_line(text: str, width: int = 90) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line[:width] + ("…" if len(line) > width else "")


def loso_recall() -> dict[str, dict]:
    """Each toxic set's recall with the shipped recipe and rule, its source left out."""
    from _toxicity_loso import FOLDS, MODEL_LANGUAGES, evidence_sets
    from train_toxicity_model import Candidate, training_rows

    from pretrain.filters.toxicity_evidence import decide
    from pretrain.filters.toxicity_model import model_card
    from pretrain.filters.toxicity_selection import calibrate, flagged_share, rule_of

    card = model_card()
    rule = rule_of({**card["thresholds"], "shipped_threshold": None})
    calibration, toxic = evidence_sets()
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fold, (left_out, held) in FOLDS.items():
            candidate = Candidate(card["recipe"]["name"], training_rows(left_out)[0], Path(tmp))
            for evidence in [*calibration.values(), *(toxic[n] for n in held)]:
                evidence.score("shipped", candidate.probabilities_of_words, MODEL_LANGUAGES)
            chosen, shares = calibrate(calibration, rule)
            for name in held:
                dropped = decide(toxic[name], chosen)[2] if chosen else None
                out[name] = {"fold": fold, "threshold": chosen.shipped if chosen else None,
                             "all": round(flagged_share(toxic[name], chosen), 4) if chosen else 0.0,
                             "flags": None if dropped is None else dropped.tolist(),
                             "calibration": shares}  # fmt: skip
    return out


def documents() -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """(toxic sets, clean sets) with ``language`` from LID-176."""
    from _toxicity_clean import evaluation_pages
    from _toxicity_loso import held_out_sets
    from _toxicity_sets import clean_documents, pages, read, reuters, statement_threads

    from pretrain.filters.langid import predict
    from tests.helpers.toxicity_splits import POLITICAL, VIOLENT

    news = reuters()
    books = clean_documents(read(DATA / "books" / "nltk_gutenberg_selections_2008.jsonl.gz"))
    clean = {
        "clean_pages": evaluation_pages(),
        "violent_news": [d for d in news if len(VIOLENT.findall(d["text"])) >= 2],
        "political_news": [d for d in news if len(POLITICAL.findall(d["text"])) >= 2],
        "news_pages": pages(news_only=True),
        "article_pages": pages(news_only=False),
        "gutenberg_books": [d for d in books if d["split"] == "heldout"],
        "all_gutenberg_books": books,
        "neutral_group_threads": [
            d for d in statement_threads(hateful=0) if d["split"] == "heldout"
        ],  # fmt: skip
    }
    toxic = held_out_sets()
    for docs in [*toxic.values(), *clean.values()]:
        for doc, (language, _) in zip(docs, predict([d["text"] for d in docs]), strict=True):
            doc["language"] = language
    return toxic, clean


def decisions(toxic: dict[str, list[dict]], clean: dict[str, list[dict]]) -> dict:
    """method -> set -> per document (dropped?, detail); ours also keeps ``judged_by``."""
    from _toxicity_release import BEFORE_V3, release_flags

    from pretrain.filters.toxicity import ToxicityFilter

    sets = {**toxic, **clean}
    ours = ToxicityFilter()
    out: dict = {"ours": {}, "20_words": {}, "judged_by": {}}
    for name, docs in sets.items():
        ours.score_batch(docs)
        checks = [ours.check(d) for d in docs]
        out["ours"][name] = [(c is not None, c[1] if c else None) for c in checks]
        out["judged_by"][name] = [ours.judged_by(d) for d in docs]
        out["20_words"][name] = [(f, None) for f in twenty_words(docs)]
    everything = [d for docs in sets.values() for d in docs]
    previous = release_flags(everything, {"v3": {}, "before_v3": BEFORE_V3})
    for method in ("v3", "before_v3"):
        out[method] = {}
        at = 0
        for name, docs in sets.items():
            out[method][name] = previous[method][at : at + len(docs)] if previous else None
            at += len(docs)
    return out


def share(flags: list | None, keep: list[bool] | None = None) -> float | None:
    if flags is None:
        return None
    picked = [f[0] if isinstance(f, tuple) else f for i, f in enumerate(flags)
              if keep is None or keep[i]]  # fmt: skip
    return round(sum(picked) / len(picked), 4) if picked else None


def run(datatrove_rounds: int = 0) -> dict:
    from pretrain.filters.toxicity_model import VERSION, model_card

    if not (DATA / "toxicity").exists():
        raise SystemExit(f"{DATA} is missing: this benchmark needs ../shared/data")
    loso = loso_recall()
    toxic, clean = documents()
    flags = decisions(toxic, clean)
    methods = ("ours", "v3", "before_v3", "20_words")
    report: dict = {"shipped_model": VERSION, "toxic": {}, "clean": {}}
    for name, docs in toxic.items():
        held = [d["split"] == "heldout" for d in docs]
        entry = {"fold": loso[name]["fold"], "n": len(docs), "loso": loso[name]["all"],
                 "loso_threshold": loso[name]["threshold"], "n_heldout": sum(held),
                 "20_words_all": share(flags["20_words"][name]),
                 "heldout": {"loso": share(loso[name]["flags"], held),
                             **{m: share(flags[m][name], held) for m in methods}}}  # fmt: skip
        report["toxic"][name] = entry
    for name, docs in clean.items():
        report["clean"][name] = {"n": len(docs), **{m: share(flags[m][name]) for m in methods}}
    pages = clean["clean_pages"]
    kinds = sorted({p["kind"] for p in pages})
    report["clean_pages_by_kind"] = {
        k: {"n": sum(p["kind"] == k for p in pages),
            **{m: share(flags[m]["clean_pages"], [p["kind"] == k for p in pages])
               for m in methods}} for k in kinds
    }  # fmt: skip
    report["flagged_clean_pages"] = [
        {"id": p["id"], "kind": p["kind"], "language": p["language"],
         "judged_by": flags["judged_by"]["clean_pages"][i],
         "detail": flags["ours"]["clean_pages"][i][1], "first_line": first_line(p["text"])}
        for i, p in enumerate(pages) if flags["ours"]["clean_pages"][i][0]
    ]  # fmt: skip
    for method in ("v3", "before_v3"):
        if flags[method]["clean_pages"] is not None:
            report[f"flagged_clean_pages_{method}"] = [
                {"id": p["id"], "first_line": first_line(p["text"])}
                for p, f in zip(pages, flags[method]["clean_pages"], strict=True) if f[0]
            ]  # fmt: skip
    judged: dict[str, int] = {}
    for by in flags["judged_by"]["clean_pages"]:
        judged[by] = judged.get(by, 0) + 1
    report["clean_pages_judged_by"] = dict(sorted(judged.items(), key=lambda kv: -kv[1]))
    report["families"] = model_card()["selection"]["recipes"]
    if datatrove_rounds:
        report["datatrove"] = datatrove_ratio(datatrove_rounds)
    report["targets_met"] = targets(report)
    return report


def datatrove_ratio(rounds: int) -> dict:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "filter_vs_datatrove.py"), "--rounds", str(rounds)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: out[k] for k in ("ratio_full_vs_datatrove_pii", "ratio_full", "ratio_rules",
                                "docs_per_s")}  # fmt: skip


def targets(report: dict) -> dict[str, bool]:
    toxic, clean = report["toxic"], report["clean"]
    pages = clean["clean_pages"]
    met = {f"loso_recall_{n}_ge_{TARGET_RECALL}": e["loso"] >= TARGET_RECALL
           for n, e in toxic.items()}  # fmt: skip
    met["clean_pages_le_0.005"] = pages["ours"] <= TARGET_CLEAN
    met.update({f"no_{n}_flagged": clean[n]["ours"] == 0 for n in NEWS_AND_BOOKS})
    for n, e in toxic.items():  # the floor: the 20-word list's recall on the same documents
        met[f"floor_{n}"] = e["loso"] >= e["20_words_all"] and (
            e["heldout"]["ours"] >= e["heldout"]["20_words"]
        )
    met["floor_clean_pages"] = pages["ours"] <= pages["20_words"] + FLOOR_MARGIN
    if "datatrove" in report:
        met["filter_chain_ge_4x_datatrove"] = (
            report["datatrove"]["ratio_full_vs_datatrove_pii"] >= 4
        )
    return met


def print_report(tox: dict) -> None:
    methods = ("loso", "ours", "v3", "before_v3", "20_words")
    print(f"toxicity ({tox['shipped_model']}): recall, each source left out of training "
          "(loso: all documents; the rest: the heldout split)")  # fmt: skip
    print(f"{'toxic set':26}{'fold':11}{'n':>6}{'loso':>7}{'n held':>7}"
          + "".join(f"{m:>10}" for m in methods))  # fmt: skip
    for name, e in tox["toxic"].items():
        cells = "".join(f"{e['heldout'][m] if e['heldout'][m] is not None else '-':>10}"
                        for m in methods)  # fmt: skip
        print(f"{name:26}{e['fold']:11}{e['n']:>6}{e['loso']:>7.3f}{e['n_heldout']:>7}{cells}")
    print("clean sets (share flagged; never trained or calibrated on):")
    for name, e in {**tox["clean"], **tox["clean_pages_by_kind"]}.items():
        cells = "".join(f"{e[m] if e[m] is not None else '-':>10}" for m in methods[1:])
        print(f"  {name:30}{e['n']:>6}{cells}")
    print(f"clean pages ours flags ({len(tox['flagged_clean_pages'])}):")
    for p in tox["flagged_clean_pages"]:
        print(f"  {p['id'][:60]:60} {p['language']:3} {p['detail']} | {p['first_line']}")
    print("clean pages judged by:", json.dumps(tox["clean_pages_judged_by"]))
    print("model families:", json.dumps(tox["families"]))
    if "datatrove" in tox:
        print("filter chain vs datatrove:", json.dumps(tox["datatrove"]))
    print("targets:", json.dumps(tox["targets_met"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datatrove-rounds", type=int, default=0)
    args = parser.parse_args()
    result = run(args.datatrove_rounds)
    print_report(result)
    print(json.dumps({"bench": "cleaning_toxicity", **result}))
