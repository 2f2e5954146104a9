"""Peak RSS of the filter stage is bounded by the batch, not the shard.

    .venv/bin/python bench/filter_memory.py [--batch-size 256]

Builds raw shards of 1×, 4× and 10× ``batch_size`` documents (real Common Crawl text from
``../shared/data`` repeated, or generated prose without it), runs ``filter_shard`` on each in
a fresh process and reports that process's peak RSS (``ru_maxrss``). Flat means the 10× shard
peaks within a few MiB of the 4× shard (1× is below steady state: one batch only).
Ends with one JSON line.
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
import resource, sys
from pretrain.filters.pipeline import FilterConfig, filter_shard
stats = filter_shard(sys.argv[1], sys.argv[2], FilterConfig(batch_size=int(sys.argv[3])))
print(stats.documents_in, stats.kept, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def texts() -> list[str]:
    if DOLMA.exists():
        with gzip.open(DOLMA, "rt") as f:
            return [t for line in f if (t := json.loads(line)["text"]).strip()]
    return [
        f"Paragraph {i}. The weather was fine and the market was busy. " * 40 for i in range(500)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    import pyarrow.parquet as pq

    from pretrain.data.schema import doc_id, documents_table

    pool = texts()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for factor in (1, 4, 10):
            n = factor * args.batch_size
            rows = []
            for i in range(n):
                text = pool[i % len(pool)] + f"\n\nCopy {i}."  # distinct ids and URLs
                url = f"http://bench.example/{i}"
                rows.append({"id": doc_id(text, "web", url), "text": text, "source": "web",
                             "url": url, "num_chars": len(text)})  # fmt: skip
            raw = f"{tmp}/raw{factor}.parquet"
            # Row groups of one batch: pyarrow decompresses a whole row group per read, so the
            # input side is bounded only if the raw shard is written in batch-sized groups.
            pq.write_table(documents_table(rows), raw, row_group_size=args.batch_size)
            del rows
            out = subprocess.run(
                [sys.executable, "-c", CHILD, raw, f"{tmp}/out{factor}", str(args.batch_size)],
                check=True, capture_output=True, text=True, cwd=ROOT,
            ).stdout.split()  # fmt: skip
            docs, kept, rss_kib = map(int, out[-3:])
            results[f"x{factor}"] = {
                "documents": docs,
                "kept": kept,
                "peak_rss_mib": round(rss_kib / 1024, 1),
            }
            print(
                f"{factor:>2}x batch ({docs} docs, kept {kept}): peak RSS {rss_kib / 1024:.1f} MiB"
            )
    growth = results["x10"]["peak_rss_mib"] - results["x1"]["peak_rss_mib"]
    print(json.dumps({"bench": "filter_memory", "batch_size": args.batch_size, **results,
                      "rss_growth_1x_to_10x_mib": round(growth, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
