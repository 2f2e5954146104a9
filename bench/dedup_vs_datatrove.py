"""Our dedup against datatrove 0.10.1's MinHash pipeline (and rensa, the Rust ceiling).

Same corpus (news, Common Crawl, OSCAR, Chinese reviews from ``../shared/data``), same
shingling (word 5-grams) and hash count (14 buckets x 8 = 112), one process each:

- signature stage: our ``compute_signatures`` vs datatrove's ``MinhashDedupSignature``
  (documents/s); plus datasketch's ``MinHash.bulk`` and rensa's ``RMinHash`` as references;
- end to end: our signatures + clusters + apply vs datatrove's four stages (signatures,
  buckets, cluster, filter).

datatrove needs ``xxhash<4``, so it runs in its own venv ``.venv-bench-datatrove/`` (created
here only when ``import datatrove`` fails there), through a subprocess::

    .venv/bin/python bench/dedup_vs_datatrove.py [--copies 2]

Ours runs with ``POLARS_MAX_THREADS=1`` (per-core figures). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VENV = ROOT / ".venv-bench-datatrove"
PY = VENV / "bin" / "python"

DATATROVE_RUN = r"""
import json, sys, time, types
from datatrove.data import Document
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupSignature,
    MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter)
from datatrove.utils.hashing import HashConfig
docs_path, work = sys.argv[1], sys.argv[2]
docs = [json.loads(l) for l in open(docs_path)]
def stream():
    for d in docs:
        yield Document(text=d["text"], id=d["id"], metadata={})
def drain(x):
    if isinstance(x, types.GeneratorType):
        for _ in x: pass
config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8,
                       hash_config=HashConfig(precision=32))
t0 = time.perf_counter()
drain(MinhashDedupSignature(f"{work}/sigs", config=config).run(stream(), rank=0, world_size=1))
t1 = time.perf_counter()
for bucket in range(config.num_buckets):
    drain(MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=config).run(
        rank=bucket, world_size=config.num_buckets))
drain(MinhashDedupCluster(f"{work}/buckets", f"{work}/remove", config=config).run())
kept = sum(1 for _ in MinhashDedupFilter(f"{work}/remove").run(stream(), rank=0, world_size=1))
t2 = time.perf_counter()
print(json.dumps({"signature_s": t1 - t0, "end_to_end_s": t2 - t0, "kept": kept}))
"""

REFERENCES_RUN = r"""
import json, sys, time
docs = [json.loads(l)["text"] for l in open(sys.argv[1])]
def shingles(t):
    w = t.lower().split()
    n = min(5, len(w))
    return [" ".join(w[i:i + n]) for i in range(len(w) - n + 1)] if w else []
out = {}
try:
    from rensa import RMinHash
    t0 = time.perf_counter()
    for t in docs:
        m = RMinHash(num_perm=112, seed=1); m.update(shingles(t)); m.digest()
    out["rensa_s"] = time.perf_counter() - t0
except ImportError as exc:
    out["rensa_error"] = str(exc)
print(json.dumps(out))
"""


def ensure_bench_venv() -> None:
    """Create/reuse the datatrove venv; install only what fails to import (idempotent)."""
    if not PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(PY), "-m", "pip", "install", "-q"]
    if subprocess.run([str(PY), "-c", "import datatrove"], capture_output=True).returncode:
        subprocess.run([*pip, "datatrove==0.10.1", "xxhash<4"], check=True)
    # datatrove's dedup package imports its tokenization and text helpers: they need
    # `tokenizers`, `regex` and `spacy` (its "en" word tokenizer), which datatrove 0.10.1
    # does not install.
    for module in ("tokenizers", "regex", "spacy"):
        if subprocess.run([str(PY), "-c", f"import {module}"], capture_output=True).returncode:
            subprocess.run([*pip, module], check=True)
    if subprocess.run([str(PY), "-c", "import rensa"], capture_output=True).returncode:
        subprocess.run([*pip, "rensa"], check=False)  # reference only: absent is reported


def run_ours(docs_uri: str, work: str) -> dict:
    """Our three stages in a fresh single-threaded process."""
    code = f"""
import json, time
from pretrain.dedup.config import DedupConfig
from pretrain.dedup.minhash import compute_signatures, permutations
from pretrain.dedup.clusters import cluster_duplicates
from pretrain.dedup.apply import apply_dedup
c = DedupConfig(incremental=False, url_dedup=False)  # datatrove has no URL dedup
permutations(c)  # imports datasketch once, outside the timing (datatrove imports before too)
t0 = time.perf_counter()
compute_signatures({docs_uri!r}, "{work}/sig/signatures.parquet", c)
t1 = time.perf_counter()
s = cluster_duplicates(["{work}/sig/signatures.parquet"], "{work}/clusters", c)
a = apply_dedup({docs_uri!r}, "{work}/clusters/clusters.parquet", "{work}/deduped")
t2 = time.perf_counter()
print(json.dumps({{"signature_s": t1 - t0, "end_to_end_s": t2 - t0, "kept": a.kept}}))
"""
    env = {**os.environ, "POLARS_MAX_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def datasketch_bulk_s(texts: list[str]) -> float:
    import time

    from datasketch import MinHash

    start = time.perf_counter()
    sets = []
    for t in texts:
        w = t.lower().split()
        n = min(5, len(w))
        sets.append([" ".join(w[i : i + n]).encode() for i in range(len(w) - n + 1)])
    MinHash.bulk(sets, num_perm=112)
    return time.perf_counter() - start


def main() -> None:
    from bench.dedup_corpus import available, load_corpus, scaled, write_documents

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, default=2, help="corpus copies (near-dup variants)")
    args = parser.parse_args()
    if not available():
        raise SystemExit("../shared/data is not present: nothing to measure")
    ensure_bench_venv()
    docs = scaled(load_corpus(), args.copies)
    n = len(docs)
    with tempfile.TemporaryDirectory() as tmp:
        docs_uri = f"{tmp}/docs/documents.parquet"
        write_documents(docs, docs_uri)
        jsonl = Path(tmp) / "docs.jsonl"
        jsonl.write_text(
            "".join(json.dumps({"id": d["id"], "text": d["text"]}) + "\n" for d in docs)
        )
        ours = run_ours(docs_uri, f"{tmp}/ours")
        run = subprocess.run([str(PY), "-c", DATATROVE_RUN, str(jsonl), f"{tmp}/dt"],
                             capture_output=True, text=True)  # fmt: skip
        if run.returncode:
            raise SystemExit(f"datatrove run failed:\n{run.stderr[-3000:]}")
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
        refs = subprocess.run([str(PY), "-c", REFERENCES_RUN, str(jsonl)],
                              capture_output=True, text=True, check=True)  # fmt: skip
        ref = json.loads(refs.stdout.strip().splitlines()[-1])
    bulk_s = datasketch_bulk_s([d["text"] for d in docs])
    rate = {
        "ours": n / ours["signature_s"],
        "datatrove": n / theirs["signature_s"],
        "datasketch_bulk": n / bulk_s,
        **({"rensa": n / ref["rensa_s"]} if "rensa_s" in ref else {}),
    }
    print(f"documents: {n:,} (1 process; ours single-threaded polars)")
    print(f"{'signatures (docs/s)':<24}" + "".join(f"{k:>18}" for k in rate))
    print(f"{'':<24}" + "".join(f"{v:>18,.0f}" for v in rate.values()))
    print(f"{'end to end (s)':<24}{'ours':>18}{'datatrove':>18}")
    print(f"{'':<24}{ours['end_to_end_s']:>18.2f}{theirs['end_to_end_s']:>18.2f}")
    print(f"kept: ours {ours['kept']:,}  datatrove {theirs['kept']:,}")
    result = {
        "bench": "dedup_vs_datatrove",
        "documents": n,
        "signature_docs_per_s": {k: round(v) for k, v in rate.items()},
        "signature_speedup_vs_datatrove": round(rate["ours"] / rate["datatrove"], 2),
        "signature_vs_rensa": round(rate["ours"] / rate["rensa"], 2) if "rensa" in rate else None,
        "end_to_end_s": {
            "ours": round(ours["end_to_end_s"], 2),
            "datatrove": round(theirs["end_to_end_s"], 2),
        },  # fmt: skip
        "end_to_end_speedup": round(theirs["end_to_end_s"] / ours["end_to_end_s"], 2),
        "kept": {"ours": ours["kept"], "datatrove": theirs["kept"]},
        **({"rensa_error": ref["rensa_error"]} if "rensa_error" in ref else {}),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
