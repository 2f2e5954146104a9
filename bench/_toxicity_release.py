"""The toxicity rule as an earlier release shipped it, run on today's documents (benchmarks only).

toxicity-v3's model of whole documents (3.0 MB) is no longer in the package, and its rule
(the document model with its evidence bar) is no longer in the code. To put it beside the
model that replaced it, :func:`release_flags` takes the release's ``pretrain`` package from
the repository's history (``git archive``), runs it in a subprocess of this interpreter (same
dependencies) on the given documents, with their ``language`` as given, and returns each
setting's decisions::

    flags = release_flags(docs, {"toxicity-v3": {}, "before-v3": BEFORE_V3})
    flags["toxicity-v3"][0]  # (dropped?, detail)

Returns None when the history is not there (a copy of the tree without ``.git``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
V3_RELEASE = "3c15d5491073181875775f8344a4a0b2da73b756"  # the last commit whose package ships toxicity-v3 (the previous model)
# The filter before toxicity-v1 (the first shipped model): the profanity model with its group
# rule at 0.08, word lists, no reporting rule, every sentence scored, 2 flagged sentences drop.
BEFORE_V3 = {"shipped_model": None, "identity_threshold": 0.08, "reported_threshold": None,
             "min_model_words": 1, "min_toxic_sentences": 2}  # fmt: skip
_RUNNER = """
import json, sys
from pretrain.filters.toxicity import ToxicityConfig, ToxicityFilter
settings = json.loads(sys.argv[1])
docs = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8")]
out = {}
for name, kwargs in settings.items():
    rule = ToxicityFilter(ToxicityConfig(**kwargs))
    decisions = []
    for start in range(0, len(docs), 500):
        batch = docs[start:start + 500]
        rule.score_batch(batch)
        decisions += [rule.check(d) for d in batch]
        for d in batch:
            d.pop("_toxicity", None)
    out[name] = [[r is not None, r[1] if r else None] for r in decisions]
json.dump(out, open(sys.argv[3], "w", encoding="utf-8"))
"""


def release_flags(
    docs: list[dict], settings: dict[str, dict], commit: str = V3_RELEASE
) -> dict[str, list[tuple[bool, str | None]]] | None:
    """Per setting (name -> ``ToxicityConfig`` keywords of that release), each document's
    (dropped?, detail), as the release's filter decides it; None without the git history."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        archive = Path(tmp) / "release.tar"
        made = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "-o", str(archive), commit, "pretrain"],
            capture_output=True, text=True,
        )  # fmt: skip
        if made.returncode != 0:
            print(f"release {commit} not available: {made.stderr.strip()}", file=sys.stderr)
            return None
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        docs_path, out_path = Path(tmp) / "docs.jsonl", Path(tmp) / "out.json"
        with docs_path.open("w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps({"text": doc["text"], "language": doc.get("language")}) + "\n")
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(
            [sys.executable, "-c", _RUNNER, json.dumps(settings), str(docs_path), str(out_path)],
            cwd=tree, env=env, check=True,
        )  # fmt: skip
        raw = json.loads(out_path.read_text(encoding="utf-8"))
    return {name: [(bool(d), detail) for d, detail in rows] for name, rows in raw.items()}
