"""Peak RSS of the raw and filter stages is bounded by the batch, not the shard.

    .venv/bin/python bench/filter_memory.py [--batch-size 256] [--factors 1,4,10,20]

For each factor ``k`` it writes a JSONL source of ``k × batch_size`` documents (real Common
Crawl text from ``../shared/data``, or generated prose without it), builds the raw shard
with ``build_raw_shard`` (as the pipeline does: bounded row groups) and runs ``filter_shard``
on it, each stage in a fresh process, and reports each process's own peak RSS (``VmHWM`` from
``/proc/self/status``, read by the child at its end). The documents cycle over the first
``batch_size`` texts of the pool (each copy gets a distinct suffix, id and URL), so every
batch holds the same mix of texts and only the number of batches changes with ``k``. Flat
means the 10× shard peaks within a few MiB of the 4× shard (1× is below steady state: one
batch only). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOLMA = ROOT / ".." / "shared" / "data" / "web"
DOLMA = DOLMA / "cc_dolma_CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
CHILD = """
import sys

def peak_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

stage, src, out, batch_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if stage == "raw":
    from pretrain.data.raw import ShardManifest, build_raw_shard
    from pretrain.data.readers import RawFile
    raw = RawFile(uri=src, source="web", kind="jsonl")
    stats = build_raw_shard(ShardManifest(key="bench-0000", files=(raw,)), out)
    print(stats.documents, stats.num_rejected, peak_mib())
else:
    from pretrain.filters.config import FilterConfig
    from pretrain.filters.pipeline import filter_shard
    stats = filter_shard(src, out, FilterConfig(batch_size=batch_size))
    print(stats.documents_in, stats.kept, peak_mib())
"""


def texts() -> list[str]:
    if DOLMA.exists():
        with gzip.open(DOLMA, "rt") as f:
            return [t for line in f if (t := json.loads(line)["text"]).strip()]
    return [
        f"Paragraph {i}. The weather was fine and the market was busy. " * 40 for i in range(500)
    ]


def child(stage: str, src: str, out: str, batch_size: int) -> tuple[int, int, float]:
    """Run one stage in a fresh process; (count, count, peak RSS MiB) as it printed them."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, stage, src, out, str(batch_size)],
        check=True, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    a, b, peak = proc.stdout.split()[-3:]
    return int(a), int(b), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--factors", default="1,4,10,20", help="shard sizes in batches")
    args = parser.parse_args()
    factors = [int(f) for f in args.factors.split(",")]
    pool = texts()[: args.batch_size]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for factor in factors:
            src = f"{tmp}/src{factor}.jsonl.gz"
            with gzip.open(src, "wt") as f:
                for i in range(factor * args.batch_size):
                    text = pool[i % len(pool)] + f"\n\nCopy {i}."  # distinct ids and URLs
                    f.write(json.dumps({"text": text, "url": f"http://bench.example/{i}"}) + "\n")
            raw_dir = f"{tmp}/raw{factor}"
            docs, rejected, raw_peak = child("raw", src, raw_dir, args.batch_size)
            docs_in, kept, peak = child(
                "filter", f"{raw_dir}/documents.parquet", f"{tmp}/out{factor}", args.batch_size
            )
            assert rejected == 0 and docs_in == docs == factor * args.batch_size
            results[f"x{factor}"] = {
                "documents": docs,
                "kept": kept,
                "peak_rss_mib": round(peak, 1),
                "raw_peak_rss_mib": round(raw_peak, 1),
            }
            print(
                f"{factor:>2}x batch ({docs} docs, kept {kept}): filter peak RSS {peak:.1f} MiB, "
                f"raw build peak RSS {raw_peak:.1f} MiB",
                flush=True,
            )
    summary = {"bench": "filter_memory", "batch_size": args.batch_size, **results}
    for lo, hi in ((1, 10), (4, 10)):
        if f"x{lo}" in results and f"x{hi}" in results:
            growth = results[f"x{hi}"]["peak_rss_mib"] - results[f"x{lo}"]["peak_rss_mib"]
            summary[f"rss_growth_{lo}x_to_{hi}x_mib"] = round(growth, 1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
