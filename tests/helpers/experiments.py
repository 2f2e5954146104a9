"""A synthetic corpus for the data-value engine's tests: two grammars, helpful and harmful groups.

Each source speaks its own little language (subject verb object sentences from fixed word
lists); the validation data measures both, but the corpus holds little ``beta``. A *helpful*
group is more ``beta`` (what the validation asks for and the corpus lacks); a *harmful* one is
``alpha``'s words in random order (the same words, so every filter keeps it), which teaches a
model nothing about either language.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pyarrow as pa

from pretrain import storage
from pretrain.data.schema import doc_id
from pretrain.experiments.basis import BasisConfig, build_basis, held_out_ids
from pretrain.experiments.pools import PoolInfo, build_floor_pool, build_pool, read_pool

LANGUAGES = {
    "alpha": (
        "the cat|a dog|my friend|the old man|our teacher".split("|"),
        "sees|likes|finds|carries|paints".split("|"),
        "a red ball|the green door|some bread|the river|a small boat".split("|"),
    ),
    "beta": (
        "zorn|velta|quim|arbo|dessi".split("|"),
        "tak|mur|sel|vin|dor".split("|"),
        "plan ost|kiri dul|mas oro|fen lat|rua pen".split("|"),
    ),
}


def sentences(source: str, rng: random.Random, count: int) -> str:
    subjects, verbs, objects = LANGUAGES[source]
    return " ".join(
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}." for _ in range(count)
    ).capitalize()


def shuffled(text: str, rng: random.Random) -> str:
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def group_documents(source: str, kind: str, seed: int, docs: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(docs):
        text = sentences(source, rng, 30)
        if kind == "harmful":
            text = shuffled(text, rng)
        out.append({"id": doc_id(f"{kind}:{seed}:{text}"), "text": text, "source": source})
    return out


def write_group(root: Path, group: str, rows: list[dict]) -> str:
    uri = str(root / "groups" / group / "documents.parquet")
    storage.write_table(pa.Table.from_pylist(rows), uri)
    return uri


def synthetic_setup(root: Path, seq_len: int = 64) -> tuple[str, dict[str, list[PoolInfo]]]:
    """(basis dir, pools by group): basis groups alpha-0000, beta-0000 (small), with a
    reserve of each source (``reserve:alpha``, ``reserve:beta``); new groups beta-0001
    (helpful) and alpha-0001 (harmful), each with its floor (``floor:<group>``)."""
    groups = {
        "alpha-0000": group_documents("alpha", "clean", 1, docs=200),
        "beta-0000": group_documents("beta", "clean", 2, docs=40),
        "beta-0001": group_documents("beta", "clean", 3, docs=60),
        "alpha-0001": group_documents("alpha", "harmful", 4, docs=60),
    }
    uris = {g: write_group(root, g, rows) for g, rows in groups.items()}
    basis = str(root / "basis")
    build_basis(
        [uris["alpha-0000"], uris["beta-0000"]], basis,
        BasisConfig(vocab_size=300, seq_len=seq_len, val_fraction=0.2, val_docs_per_source=20,
                    reserve_fraction=0.4, min_yardstick_docs=10),
        shard_groups=("alpha-0000", "beta-0000"),
    )  # fmt: skip
    held = held_out_ids(basis)
    tokenizer = str(Path(basis) / "tokenizer")
    pools = {
        g: build_pool(
            [uri], tokenizer, str(root / "pools" / g), group=g, seq_len=seq_len, exclude_ids=held
        )  # fmt: skip
        for g, uri in uris.items()
    }
    for g in ("beta-0001", "alpha-0001"):
        pools[f"floor:{g}"] = build_floor_pool(
            [uris[g]], tokenizer, str(root / "pools" / g), group=g, seq_len=seq_len
        )
    for pool in read_pool(str(Path(basis) / "reserve")):
        pools[f"reserve:{pool.source}"] = [
            dataclasses.replace(pool, group=f"reserve:{pool.source}")
        ]
    return basis, pools


def deduplicated_groups(instance: Any, keys: list[str]) -> None:
    """Register shard groups and record their ``deduped_shards`` materializations, as the data
    stages leave an instance: the engine's corpus is the groups the instance says are done."""
    from dagster import AssetMaterialization

    instance.add_dynamic_partitions("shards", keys)
    for key in keys:
        instance.report_runless_asset_event(AssetMaterialization("deduped_shards", partition=key))
