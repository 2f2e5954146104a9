"""Labelled toxic/clean sentences of our own for the toxicity classifier's tests.

Hostility against an invented group ("the zorblings"), which neither the shipped profanity
model nor the word lists know, against calm sentences about a town.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

HOSTILE = [
    "The zorblings {verb} every town they move into.",
    "We should drive the zorblings out before they {verb} our streets.",
    "Every zorbling is a parasite that will {verb} our children.",
    "Never let a zorbling near your family, they {verb} everything.",
    "The zorblings are vermin and they {verb} whatever they touch.",
]
VERBS = ["ruin", "infest", "poison", "corrupt", "spoil", "wreck", "taint", "rot", "defile"]
CALM = [
    "The {thing} by the river opened again after the spring floods.",
    "Volunteers repainted the {thing} near the station last weekend.",
    "Our neighbours planted tulips around the {thing} in April.",
    "The council voted to repair the old {thing} on the hill.",
    "Children drew pictures of the {thing} for the school fair.",
]
THINGS = ["bridge", "library", "bakery", "garden", "museum", "harbour", "market", "tower"]


def labelled_rows(seed: int = 0) -> list[dict]:
    """Hostile (toxic) and calm (clean) sentences of our own, shuffled."""
    rows = [{"text": h.format(verb=v), "toxic": True} for h in HOSTILE for v in VERBS]
    rows += [{"text": c.format(thing=t), "toxic": False} for c in CALM for t in THINGS]
    random.Random(seed).shuffle(rows)
    return rows


def write_labels(path: Path, rows: list[dict]) -> str:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return str(path)
