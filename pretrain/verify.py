"""Invariant checks over written artifacts, recomputed from the files themselves.

The Dagster layer turns each result into an asset check; nothing here trusts a stage's own
stats file. Every function returns ``CheckOutcome(passed, description, metadata)``.

    from pretrain import verify
    outcome = verify.reconciles(raw_uri, [kept_uri, rejects_uri])
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pretrain import storage
from pretrain.checks import CheckOutcome, count_rows


def non_empty(uri: str, what: str = "documents") -> CheckOutcome:
    rows = count_rows(uri)
    return CheckOutcome(rows > 0, f"{rows} {what} in {uri}", {"rows": rows})


def reconciles(input_uri: str, output_uris: list[str]) -> CheckOutcome:
    """Rows in == sum of rows out (kept + rejected): nothing silently lost."""
    rows_in = count_rows(input_uri)
    rows_out = {Path(u).name: count_rows(u) for u in output_uris}
    total = sum(rows_out.values())
    return CheckOutcome(
        rows_in == total,
        f"in={rows_in} out={total} ({rows_out})",
        {"rows_in": rows_in, "rows_out": total},
    )


def same_rows(uri_a: str, uri_b: str) -> CheckOutcome:
    a, b = count_rows(uri_a), count_rows(uri_b)
    return CheckOutcome(a == b, f"{a} rows vs {b} rows", {"rows_a": a, "rows_b": b})


def rate_in_range(removed: int, total: int, low: float, high: float) -> CheckOutcome:
    rate = removed / total if total else 0.0
    return CheckOutcome(
        low <= rate <= high,
        f"rate {rate:.4f} expected within [{low}, {high}]",
        {"rate": rate, "removed": removed, "total": total},
    )


def splits_disjoint(train_uri: str, val_uri: str) -> CheckOutcome:
    train_ids = set(storage.read_table(train_uri, columns=["id"]).column("id").to_pylist())
    val_ids = set(storage.read_table(val_uri, columns=["id"]).column("id").to_pylist())
    overlap = len(train_ids & val_ids)
    return CheckOutcome(
        overlap == 0 and bool(val_ids),
        f"{overlap} ids in both train and validation ({len(val_ids)} validation ids)",
        {"overlap": overlap, "train_ids": len(train_ids), "val_ids": len(val_ids)},
    )


def tokenizer_round_trip(tokenizer_uri: str, texts_uri: str, sample: int = 200) -> CheckOutcome:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(storage.read_bytes(tokenizer_uri).decode())
    texts = storage.read_table(texts_uri, columns=["text"]).column("text").to_pylist()[:sample]
    exact = sum(tok.decode(tok.encode(t).ids, skip_special_tokens=False) == t for t in texts)
    rate = exact / len(texts) if texts else 0.0
    return CheckOutcome(
        rate == 1.0, f"{exact}/{len(texts)} texts round-trip exactly", {"round_trip": rate}
    )


def ledger_matches_tokens(packed_dir_uri: str) -> CheckOutcome:
    """Tokens in the train shards == tokens accounted for by the step ledger."""
    index = storage.read_json(storage.join(packed_dir_uri, "index.json"))
    train = index["splits"]["train"]
    ledger = storage.read_table(
        storage.join(packed_dir_uri, "ledger.parquet"),
        columns=["token_start", "token_end", "split"],
    )
    is_train = pc.equal(ledger["split"], "train")
    lengths = pc.subtract(ledger["token_end"], ledger["token_start"])
    ledger_tokens = int(pc.sum(pc.filter(lengths, is_train)).as_py() or 0)
    shard_tokens = 0
    for f in train["files"]:
        fs, path = storage.filesystem(storage.join(packed_dir_uri, f["file"]))
        shard_tokens += fs.get_file_info(path).size // (2 if index["dtype"] == "uint16" else 4)
    passed = ledger_tokens == shard_tokens == int(train["num_tokens"])
    return CheckOutcome(
        passed,
        f"ledger={ledger_tokens} shards={shard_tokens} index={train['num_tokens']}",
        {"ledger_tokens": ledger_tokens, "shard_tokens": shard_tokens},
    )


def report_finite(report_uri: str) -> CheckOutcome:
    report = storage.read_json(report_uri)
    numbers = _numbers(report)
    bad = [k for k, v in numbers if not math.isfinite(v)]
    return CheckOutcome(
        not bad and bool(numbers), f"{len(numbers)} numbers, non-finite: {bad[:5]}", {}
    )


def _numbers(obj: Any, prefix: str = "") -> list[tuple[str, float]]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [(prefix, float(obj))]
    if isinstance(obj, dict):
        return [n for k, v in obj.items() for n in _numbers(v, f"{prefix}.{k}")]
    if isinstance(obj, list):
        return [n for i, v in enumerate(obj) for n in _numbers(v, f"{prefix}[{i}]")]
    return []


def ledger_excludes_validation(packed_dir_uri: str, val_uri: str) -> CheckOutcome:
    """No document of the validation split appears in a training sequence."""
    ledger = storage.read_table(
        storage.join(packed_dir_uri, "ledger.parquet"), columns=["doc_id", "split"]
    )
    train_ids = {
        d
        for d, s in zip(ledger["doc_id"].to_pylist(), ledger["split"].to_pylist(), strict=True)
        if s == "train"
    }
    val_ids = set(storage.read_table(val_uri, columns=["id"]).column("id").to_pylist())
    overlap = len(train_ids & val_ids)
    return CheckOutcome(
        overlap == 0 and bool(train_ids),
        f"{overlap} validation documents inside training sequences",
        {"overlap": overlap, "train_docs_in_ledger": len(train_ids)},
    )


def manifest_reconciles(shard_dir_uri: str) -> CheckOutcome:
    """Records read per file (manifest.json) == rows in documents.parquet + rejects.parquet."""
    manifest = storage.read_json(storage.join(shard_dir_uri, "manifest.json"))
    records = sum(int(f["documents"]) + int(f["rejected"]) for f in manifest["files"])
    rows = count_rows(storage.join(shard_dir_uri, "documents.parquet")) + count_rows(
        storage.join(shard_dir_uri, "rejects.parquet")
    )
    return CheckOutcome(
        records == rows,
        f"{records} records read from {len(manifest['files'])} files, {rows} rows written",
        {"records": records, "rows": rows},
    )


def train_decontaminated(train_uri: str, decontam: Any, *, examples: int = 5) -> CheckOutcome:
    """No training document of ``train_uri`` shares an n-gram with the evaluation sets.

    Re-runs the library's matcher (``pretrain.decontam``, 13-grams by default) over the written
    ``data_mixture/train.parquet``, streamed one row group at a time. ``decontam`` is the
    mixture's ``DecontamConfig`` (or None). Eval files that are absent are skipped and listed;
    with none configured or none present the check passes and says so."""
    import dataclasses

    from pretrain.decontam import EvalNgrams

    files = decontam.resolved_files() if decontam is not None else ()
    present = [p for p in files if Path(p).is_file()]
    missing = [p for p in files if not Path(p).is_file()]
    if not present:
        why = "no eval files configured" if not files else f"none of {len(files)} eval files exist"
        return CheckOutcome(
            True,
            f"nothing to check: {why} (run `pretrain evals fetch`, or set decontam eval_files "
            "to protect evaluation sets)",
            {"eval_files": len(present), "missing_eval_files": missing, "contaminated": 0},
        )
    ngrams = EvalNgrams.load(dataclasses.replace(decontam, eval_files=tuple(present)))
    rows, hits, by_set = 0, set(), {name: 0 for name in ngrams.sets}
    found: list[str] = []
    fs, path = storage.filesystem(train_uri)
    with fs.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        for group in range(parquet.num_row_groups):
            for batch in parquet.iter_batches(columns=["id", "text"], row_groups=[group]):
                cols = batch.to_pydict()
                for doc, text in zip(cols["id"], cols["text"], strict=True):
                    rows += 1
                    sets = ngrams.matches(text or "")
                    if not sets or doc in hits:
                        continue
                    hits.add(doc)
                    for name in sets:
                        by_set[name] += 1
                    if len(found) < examples:
                        found.append(f"{doc} ({','.join(sets)})")
    described = (
        f"{len(hits)} training documents ({rows} rows read) share a {ngrams.ngram}-gram with "
        f"{len(present)} eval file(s)" + (f", e.g. {found}" if found else "")
    )
    return CheckOutcome(
        not hits,
        described + (f"; skipped missing {missing}" if missing else ""),
        {
            "contaminated": len(hits),
            "train_rows": rows,
            "ngram": ngrams.ngram,
            "contaminated_by_eval_set": by_set,
            "eval_files": len(present),
            "missing_eval_files": missing,
            "examples": found,
        },
    )
