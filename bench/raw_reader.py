"""Raw reader cost of the damage-tolerant streams (issue 19): ours vs the stdlib/zstandard readers.

``pretrain.data.readers.iter_records`` now decompresses gzip member by member (to resync after
a corrupt member) and zstd frame by frame (to notice a cut), and caps every line. This bench
reads real JSONL files from ``../shared/data`` three ways and prints documents per second:

- ``baseline``: ``gzip.GzipFile`` / ``zstandard`` ``stream_reader`` line iteration + ``json.loads``
  (what the reader did before, minus its checks);
- ``ours``: ``iter_records`` (streams + every check and reject);
- the peak RSS of reading a 1 GiB gzip bomb (a single line of zeros) with ``iter_records``.

Run::

    .venv/bin/python bench/raw_reader.py

Ends with one JSON line; results are recorded in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pretrain.data.readers import RawFile, iter_records  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
FILES = [
    "web/news/reuters21578_apte_nltk_10788docs.jsonl.gz",
    "web/zh/sophonplus_chinese_reviews_82k.jsonl.zst",
    "code/python3.11.7_stdlib_1790files.jsonl.zst",
]


def baseline(path: Path) -> int:
    raw = path.open("rb")
    if path.suffix == ".gz":
        stream = gzip.GzipFile(fileobj=raw)
    else:
        import zstandard

        stream = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))
    n = 0
    for line in stream:
        if line.strip():
            obj = json.loads(line)
            n += isinstance(obj.get("text"), str)
    return n


def ours(path: Path) -> int:
    return sum(
        "reason" not in r for r in iter_records(RawFile(uri=str(path), source="web", kind="jsonl"))
    )


def best_of(fn, path: Path, repeats: int = 3) -> tuple[int, float]:
    times, n = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        n = fn(path)
        times.append(time.perf_counter() - started)
    return n, min(times)


BOMB = """
import sys
from pretrain.data.readers import RawFile, iter_records
hwm = lambda: int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
before = hwm()
list(iter_records(RawFile(uri=sys.argv[1], source="web", kind="jsonl")))
print((hwm() - before) // 1024)
"""


def bomb_growth_mb() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bomb.jsonl.gz"
        zeros, packer = bytes(2**24), zlib.compressobj(1, zlib.DEFLATED, 31)
        with path.open("wb") as f:
            for _ in range(64):
                f.write(packer.compress(zeros))
            f.write(packer.flush())
        out = subprocess.run(
            [sys.executable, "-c", BOMB, str(path)], capture_output=True, text=True, check=True,
            env={"PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        return int(out.stdout.strip())


def main() -> None:
    rows = {}
    print(f"{'file':<48} {'docs':>7} {'baseline docs/s':>16} {'ours docs/s':>12} {'ratio':>6}")
    for name in FILES:
        path = DATA / name
        if not path.exists():
            print(f"skip {name}: ../shared/data absent")
            continue
        n_base, t_base = best_of(baseline, path)
        n_ours, t_ours = best_of(ours, path)
        ratio = t_ours / t_base
        rows[Path(name).name] = {
            "docs": n_ours, "baseline_docs": n_base, "baseline_s": round(t_base, 3),
            "ours_s": round(t_ours, 3), "time_ratio": round(ratio, 2),
        }  # fmt: skip
        print(f"{Path(name).name[:48]:<48} {n_ours:>7,} {n_base / t_base:>16,.0f} "
              f"{n_ours / t_ours:>12,.0f} {ratio:>5.2f}x")  # fmt: skip
    growth = bomb_growth_mb()
    print(f"1 GiB gzip bomb: reader peak RSS grew by {growth} MB (was 2.2 GB before the line cap)")
    print(json.dumps({"bench": "raw_reader", "files": rows, "bomb_rss_growth_mb": growth}))


if __name__ == "__main__":
    main()
