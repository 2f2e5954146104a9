"""A data variant as a view: how many sequences of each pool a proxy reads, and the index that
says so (``"view": true``, :mod:`pretrain.packing.format`), with nothing copied.

    plan = plan_view(pools, weights={"web": 0.6, "news": 0.4}, num_sequences=2048,
                     max_epochs=4.0, boost={}, seed=0)
    plan.rows            # {"web-0000/web": 700, "web-0001/web": 529, "news-0000/news": 819}
    write_view(plan, pools, "exp/mix-0a1b2c3d-s0/view")   # index.json + _COMMITTED only

Shares: ``weights`` over sources (``None``: each source's natural share of the pool tokens),
spread over a source's pools in proportion to their size; a ``boost`` gives a shard group a
share of the whole budget first (or all that ``max_epochs`` passes over it give, if less), spread
over its pools by size (admission experiments probe a new group that way). Rows are keyed by pool name, ``<group>/<source>``.
A pool read more than once is repeated whole (epochs); more than ``max_epochs`` times is refused,
as the mixture's epoch caps refuse it. Which rows of a pool a proxy reads starts at an offset
drawn from the seed, so repeats see different samples of a large pool.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pretrain import storage
from pretrain.errors import DataError
from pretrain.experiments.pools import PoolInfo
from pretrain.packing import FORMAT, read_packed_index


@dataclass(frozen=True, kw_only=True)
class ViewPlan:
    rows: dict[str, int]  # pool name (<group>/<source>) -> sequences read
    seed: int

    @property
    def num_sequences(self) -> int:
        return sum(self.rows.values())

    def shares(self, pools: Sequence[PoolInfo]) -> dict[str, float]:
        """Share of the budget per source."""
        source = {p.name: p.source for p in pools}
        out: dict[str, float] = {}
        for group, n in self.rows.items():
            out[source[group]] = out.get(source[group], 0.0) + n / max(1, self.num_sequences)
        return out


def natural_shares(pools: Sequence[PoolInfo]) -> dict[str, float]:
    """Each source's share of the pool tokens."""
    total = sum(p.tokens for p in pools)
    if total == 0:
        raise DataError("the token pools are empty: nothing to train a proxy on")
    shares: dict[str, float] = {}
    for p in pools:
        shares[p.source] = shares.get(p.source, 0.0) + p.tokens / total
    return shares


def _split(total: int, sizes: Mapping[str, float]) -> dict[str, int]:
    """``total`` split in proportion to ``sizes`` with whole numbers (largest remainder)."""
    weight = sum(sizes.values())
    if total <= 0 or weight <= 0:
        return {k: 0 for k in sizes}
    exact = {k: total * v / weight for k, v in sizes.items()}
    out = {k: math.floor(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], k))[: total - sum(out.values())]:
        out[k] += 1
    return out


def plan_view(
    pools: Sequence[PoolInfo],
    *,
    weights: Mapping[str, float] | None,
    num_sequences: int,
    max_epochs: float,
    boost: Mapping[str, float] | None = None,
    seed: int = 0,
) -> ViewPlan:
    """Sequences per pool for a budget of ``num_sequences`` (see the module docstring)."""
    by_name = {p.name: p for p in pools}
    boost = dict(boost or {})
    unknown = sorted(set(boost) - {p.group for p in pools})
    if unknown:
        raise DataError(f"boosted shard groups {unknown} have no token pool")
    rows: dict[str, int] = {}
    for group, share in boost.items():  # all of it the epoch cap allows, at most the share
        members = {p.name: float(p.sequences) for p in pools if p.group == group}
        cap = math.floor(max_epochs * sum(members.values()))
        rows.update(_split(min(round(share * num_sequences), cap), members))
    rest = [p for p in pools if p.group not in boost]
    remaining = num_sequences - sum(rows.values())
    shares = dict(weights) if weights is not None else natural_shares(rest)
    missing = sorted(s for s, w in shares.items() if w > 0 and not any(p.source == s for p in rest))
    if missing:
        raise DataError(f"weights name sources {missing} with no token pool in this variant")
    per_source = _split(remaining, {s: w for s, w in shares.items() if w > 0})
    for source, n in per_source.items():
        rows.update(_split(n, {p.name: float(p.sequences) for p in rest if p.source == source}))
    for name, n in rows.items():
        available = by_name[name].sequences
        if n and (available == 0 or n / available > max_epochs + 1e-9):
            raise DataError(
                f"the variant reads {n} sequences of pool {name!r}, which has {available}: more "
                f"than max_epochs={max_epochs}; lower its weight or the budget"
            )
    return ViewPlan(rows={g: n for g, n in rows.items() if n}, seed=seed)


def _offset(seed: int, group: str, available: int) -> int:
    digest = hashlib.sha256(f"{seed}:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % max(1, available)


def _ranges(start: int, count: int, available: int) -> list[tuple[int, int]]:
    """Rows ``[start, start+count)`` of a pool read circularly: whole passes, then the rest."""
    out = []
    while count > 0:
        take = min(count, available - start)
        out.append((start, take))
        count -= take
        start = 0
    return out


def write_view(plan: ViewPlan, pools: Sequence[PoolInfo], out_dir: str) -> str:
    """Write the view's ``index.json`` (and ``_COMMITTED``) into ``out_dir`` (local)."""
    if storage.is_s3(out_dir):
        raise DataError(f"{out_dir}: a view is written on the node that trains (a local folder)")
    by_name = {p.name: p for p in pools}
    header: dict | None = None
    files = []
    for name in sorted(plan.rows):
        pool = by_name[name]
        index = read_packed_index(pool.path)
        if header is None:
            header = {
                "format": FORMAT,
                "seq_len": index.seq_len,
                "vocab_size": index.vocab_size,
                "dtype": index.dtype.name,
                "eos_id": index.eos_id,
                "bos_id": index.bos_id,
                "pad_id": index.pad_id,
                "tokenizer_sha256": index.tokenizer_sha256,
            }
        elif index.tokenizer_sha256 != header["tokenizer_sha256"]:
            raise DataError(f"pool {pool.path} was made with another tokenizer than the others")
        shards = [(f.path, f.num_sequences) for f in index.files("train")]
        available = sum(n for _, n in shards)
        start = _offset(plan.seed, name, available)
        for first, count in _ranges(start, plan.rows[name], available):
            # a pool's rows are its files' rows in order: map the range onto its files
            base = 0
            for path, n in shards:
                lo, hi = max(first, base), min(first + count, base + n)
                if lo < hi:
                    files.append(
                        {
                            "file": str(Path(path).resolve()),
                            "first": lo - base,
                            "num_sequences": hi - lo,
                            "source": pool.source,
                        }
                    )
                base += n
    if header is None:
        raise DataError("the view reads no sequences: give the variant a budget")
    index_json = {**header, "view": True, "splits": {"train": {"files": files}}}
    storage.write_bytes(
        json.dumps(index_json, indent=2).encode(), storage.join(out_dir, "index.json")
    )
    storage.commit_marker(out_dir)
    return out_dir
