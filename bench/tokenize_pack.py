"""Benchmark: our tokenize + pack against raw ``tokenizers`` ``encode_batch``.

    .venv/bin/python bench/tokenize_pack.py                 # ~24 MB of text, 2 processes
    .venv/bin/python bench/tokenize_pack.py --mb 64 --workers 4

Text: the Python standard library of this interpreter (code) plus, when ``../shared/data`` is
present, Reuters-21578 newswire (prose). A byte-level BPE (vocab 8192) is trained once.

- **baseline**: ``--workers`` spawned processes, each with one ``tokenizers`` thread, run
  ``encode_batch`` over its contiguous share of the same texts in batches of 512 documents;
  the texts are loaded before the clock starts and only token counts come back.
- **ours**: ``pack_tokens(..., PackingConfig(num_workers=--workers))`` end to end: reading
  Parquet, encoding in the same number of processes, EOS, packing, shuffle, shards, ledger,
  index (worker start-up included).

Overhead = ours / baseline - 1 (target ≤ 15 %). Peak RSS of ``pack_tokens`` (one process) is
measured in a fresh subprocess for the corpus and for 4 copies of it: streaming means the two
peaks are about equal. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pretrain import storage  # noqa: E402
from pretrain.packing import PackingConfig, pack_tokens  # noqa: E402
from pretrain.tokenizer import TokenizerConfig, train_tokenizer  # noqa: E402

REUTERS = ROOT.parent / "shared/data/web/news/reuters21578_apte_nltk_10788docs.jsonl.gz"
BATCH = 512
_TEXTS: list[str] = []


def corpus(mb: float) -> list[dict]:
    """Documents up to ``mb`` megabytes: half stdlib code, half Reuters when available."""
    budget = int(mb * 2**20)
    docs: list[dict] = []
    prose_budget = budget // 2 if REUTERS.is_file() else 0
    if prose_budget:
        with gzip.open(REUTERS, "rt") as f:
            for n, line in enumerate(f):
                text = json.loads(line)["text"]
                docs.append({"id": f"news-{n}", "text": text, "source": "news", "epoch": 0})
                prose_budget -= len(text.encode())
                if prose_budget <= 0:
                    break
    used = sum(len(d["text"].encode()) for d in docs)
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if used >= budget:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        docs.append({"id": f"code-{len(docs)}", "text": text, "source": "code", "epoch": 0})
        used += len(text.encode())
    return docs


def write_mixture(docs: list[dict], mix: Path, copies: int = 1) -> None:
    rows = [{**d, "id": f"{d['id']}-{c}"} for c in range(copies) for d in docs]
    storage.write_table(pa.Table.from_pylist(rows), str(mix / "train.parquet"))
    val = [{k: v for k, v in d.items() if k != "epoch"} for d in docs[:20]]
    storage.write_table(pa.Table.from_pylist(val), str(mix / "val.parquet"))


def _init(tok_json: str, train_uri: str) -> None:
    os.environ["RAYON_NUM_THREADS"] = "1"
    global _TOK
    from tokenizers import Tokenizer

    _TOK = Tokenizer.from_str(tok_json)
    texts = storage.read_table(train_uri, columns=["text"]).column("text").to_pylist()
    _TEXTS.extend(texts)


def _encode_share(args: tuple[int, int]) -> int:
    worker, workers = args
    lo = len(_TEXTS) * worker // workers
    hi = len(_TEXTS) * (worker + 1) // workers
    tokens = 0
    for start in range(lo, hi, BATCH):
        encodings = _TOK.encode_batch(
            _TEXTS[start : min(hi, start + BATCH)], add_special_tokens=False
        )
        tokens += sum(len(e.ids) for e in encodings)
    return tokens


def baseline(tok_json: str, train_uri: str, workers: int) -> tuple[float, int]:
    """(seconds, tokens) of raw encode_batch in ``workers`` single-threaded processes."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers, initializer=_init, initargs=(tok_json, train_uri)) as pool:
        pool.map(abs, range(workers))  # every worker initialized before the clock starts
        start = time.perf_counter()
        tokens = sum(pool.map(_encode_share, [(w, workers) for w in range(workers)], chunksize=1))
        return time.perf_counter() - start, tokens


def peak_rss_mb(mix: Path, tok: Path, out: Path) -> float:
    """Peak RSS of pack_tokens (num_workers=1) in a fresh process."""
    code = (
        "import resource, sys; sys.path.insert(0, sys.argv[4]);"
        "from pretrain.packing import PackingConfig, pack_tokens;"
        "pack_tokens(sys.argv[1], sys.argv[2], sys.argv[3], PackingConfig(seq_len=1024));"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code, str(mix), str(tok), str(out), str(ROOT)],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return int(result.stdout.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=24.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=8192)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        docs = corpus(args.mb)
        text_mb = sum(len(d["text"].encode()) for d in docs) / 2**20
        write_mixture(docs, tmp / "mix")
        tok_config = TokenizerConfig(vocab_size=args.vocab_size, sample_chars=4_000_000)
        train_tokenizer(str(tmp / "mix" / "train.parquet"), str(tmp / "tok"), tok_config)
        tok_json = (tmp / "tok" / "tokenizer.json").read_text()
        base_s, base_tokens = baseline(tok_json, str(tmp / "mix" / "train.parquet"), args.workers)
        config = PackingConfig(seq_len=1024, num_workers=args.workers)
        start = time.perf_counter()
        stats = pack_tokens(str(tmp / "mix"), str(tmp / "tok"), str(tmp / "out"), config)
        ours_s = time.perf_counter() - start
        ours_tokens = stats.split_tokens["train"]["tokenized"]
        assert ours_tokens == base_tokens + len(docs), "same text: ours adds one EOS per doc"
        write_mixture(docs, tmp / "mix4", copies=4)
        rss_1x = peak_rss_mb(tmp / "mix", tmp / "tok", tmp / "rss1")
        rss_4x = peak_rss_mb(tmp / "mix4", tmp / "tok", tmp / "rss4")
    ratio = ours_s / base_s
    print(f"text: {len(docs)} documents, {text_mb:.1f} MB; {args.workers} processes; "
          f"cpu_count={os.cpu_count()}")  # fmt: skip
    print(f"{'':28s}{'baseline (encode_batch)':>26s}{'ours (tokenize+pack)':>24s}")
    print(f"{'seconds':28s}{base_s:>26.2f}{ours_s:>24.2f}")
    print(f"{'tokens/s':28s}{base_tokens / base_s:>26,.0f}{ours_tokens / ours_s:>24,.0f}")
    print(f"ratio ours/baseline = {ratio:.3f} (overhead {ratio - 1:+.1%}, target <= +15%)")
    print(f"peak RSS pack_tokens: 1x corpus {rss_1x:.0f} MB, 4x corpus {rss_4x:.0f} MB")
    print(
        json.dumps(
            {
                "bench": "tokenize_pack",
                "text_mb": round(text_mb, 2),
                "documents": len(docs),
                "processes": args.workers,
                "baseline_s": round(base_s, 3),
                "ours_s": round(ours_s, 3),
                "baseline_tokens_per_s": round(base_tokens / base_s),
                "ours_tokens_per_s": round(ours_tokens / ours_s),
                "ratio": round(ratio, 4),
                "overhead_pct": round(100 * (ratio - 1), 1),
                "peak_rss_mb_1x": round(rss_1x, 1),
                "peak_rss_mb_4x": round(rss_4x, 1),
                "max_rss_self_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


if __name__ == "__main__":
    main()
