"""Shared test helpers (moved from test_tokenizer.py); tests import these, never each other."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa

from pretrain import storage

WORDS = "the model reads data and every token costs compute so we pack it tight".split()


CJK = "数据模型训练语言文本中文日本語東京大学習"


def _text(source: str, rng: random.Random) -> str:
    if source == "web":
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 80))) + "."
    if source == "code":
        name = rng.choice(WORDS)
        return f"def {name}(x):\n    if x:\n\treturn x  # {name}\n    return None\n"
    return "".join(rng.choice(CJK) for _ in range(rng.randint(20, 60)))


def write_train(path: Path, counts: dict[str, int], seed: int = 0) -> str:
    rng = random.Random(seed)
    rows = [
        {"id": f"{source}-{n}", "text": _text(source, rng), "source": source, "epoch": 0}
        for source, count in counts.items()
        for n in range(count)
    ]
    uri = str(path / "train.parquet")
    storage.write_table(pa.Table.from_pylist(rows), uri)
    return uri


ENGLISH = (
    "The river behind the old mill runs fast in the spring, when the snow on the hills melts "
    "and the water rises over the lower stones. Children from the village walk down to the "
    "bank after school to watch the small boats pass and to count the birds that nest in the "
    "reeds. In the summer the current slows, the water turns clear and warm, and families "
    "bring bread and fruit to eat in the shade of the tall trees along the path.\n"
    "Every autumn the miller repairs the wooden wheel before the first storms arrive. "
    "His daughter keeps the accounts and sells flour to bakers in three nearby towns."
)


FRENCH = (
    "Le petit marché du samedi ouvre très tôt sur la place de la mairie, et les habitants "
    "viennent y acheter des légumes frais, du fromage et du pain encore chaud. Les "
    "marchands installent leurs tables sous les arbres pendant que le soleil se lève "
    "doucement derrière l'église. Vers midi, la place devient calme, les enfants jouent "
    "près de la fontaine et les anciens discutent longuement sur les bancs en regardant "
    "passer les voitures.\nLe soir, tout le monde rentre à la maison avec un panier plein. "
    "Le dimanche, le marché reste fermé et la ville se repose."
)


# Plain, varied English sentences: text that every filter keeps (tests take a prefix).
PLAIN_SENTENCES = [
    "The river rose after three days of rain and the old bridge was closed to traffic.",
    "Farmers in the valley moved their cattle to higher fields before the water arrived.",
    "A new library opened near the station, with a reading room that faces the park.",
    "The council approved a plan to plant two hundred trees along the main avenue.",
    "Local students built a small weather station on the roof of their school.",
    "The bakery on the corner now opens at six, an hour earlier than last year.",
    "Engineers inspected the tunnel and found cracks that will need repairs this summer.",
    "Volunteers cleaned the beach on Saturday and collected forty bags of rubbish.",
    "The museum will show maps of the coast drawn by sailors two centuries ago.",
    "A storm knocked out power to several villages, and crews worked through the night.",
    "The orchestra announced a free concert in the square at the end of the month.",
    "Prices at the market fell as the harvest of apples and pears came in early.",
    "The ferry service will add a late crossing on Fridays during the holiday season.",
    "Researchers counted more birds at the lake this spring than in any recent year.",
    "The town's oldest shop, a hardware store, celebrated its hundredth anniversary.",
    "Children painted a mural on the wall of the sports hall with help from artists.",
]
