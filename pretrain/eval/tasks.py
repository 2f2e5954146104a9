"""Zero-shot multiple-choice tasks, read from their public files in the lm-evaluation-harness style.

    from pretrain.eval.tasks import default_tasks, load_task
    specs = default_tasks(max_examples=200)  # the task cache
    examples = load_task(specs[0], seed=0)      # None when the file is absent (reported skipped)
    examples[0].context, examples[0].choices, examples[0].gold

Each task is turned into :class:`MultipleChoice` examples: a context and choices, each choice
scored as the log-likelihood of ``context + choice`` given the context (the harness's
``loglikelihood`` requests). Formats, as in lm-evaluation-harness v0.4:

- ``hellaswag``: context = ``query`` (already preprocessed: activity label + ctx), choices =
  ``" " + ending``; label = ``label``.
- ``arc_easy``: context = ``"Question: {stem}\\nAnswer:"``, choices = ``" " + text``; the
  gold index is the position of ``answerKey`` among the choice labels (``A``-``E`` or ``1``-``5``).
- ``blimp``: empty context, choices = ``[sentence_good, sentence_bad]``, gold 0: the whole
  sentence is scored after the document-boundary token, a paired comparison.

A file with more examples than ``max_examples`` is subsampled with a seeded draw (BLiMP is
sorted by paradigm, so its first 200 lines would be one paradigm); the draw is sorted back into
file order so reruns give byte-identical reports.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pretrain.errors import ConfigError, DataError
from pretrain.eval_cache import unreadable_message, verify_eval_file
from pretrain.settings import check_types

TASK_KINDS = ("hellaswag", "arc_easy", "blimp")
DEFAULT_FILES = {
    "hellaswag": "hellaswag_val_10042.jsonl.gz",
    "arc_easy": "arc_easy_dev_570.jsonl.gz",
    "blimp": "blimp_67paradigms_67000pairs.jsonl.gz",
}


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    """One task: its format (``kind``), the file to read, and how many examples to score."""

    kind: str
    path: str
    max_examples: int = 200
    name: str = ""  # report name; defaults to ``kind``

    def __post_init__(self) -> None:
        check_types(self)
        if self.kind not in TASK_KINDS:
            raise ConfigError(f"TaskSpec.kind={self.kind!r}; use one of {TASK_KINDS}")
        if self.max_examples <= 0:
            raise ConfigError(
                f"TaskSpec.max_examples={self.max_examples} for {self.kind}; use >= 1 "
                "(drop the task from EvalConfig.tasks to not run it)"
            )
        if not self.name:
            object.__setattr__(self, "name", self.kind)


@dataclass(frozen=True, kw_only=True)
class MultipleChoice:
    context: str
    choices: tuple[str, ...]
    gold: int


def default_tasks(eval_dir: str | None = None, max_examples: int = 200) -> tuple[TaskSpec, ...]:
    """HellaSwag, ARC-Easy and BLiMP read from ``eval_dir`` (default: the task cache that
    ``pretrain evals fetch`` fills, see :func:`pretrain.eval_cache.default_eval_dir`).

    A cache with ``SOURCES.json`` is hash-checked first: a task file changed after it was
    downloaded raises DataError instead of being scored."""
    from pretrain.eval_cache import MANIFEST, default_eval_dir, verify_eval_dir

    folder = Path(eval_dir) if eval_dir else default_eval_dir()
    if (folder / MANIFEST).is_file():
        verify_eval_dir(folder)
    return tuple(
        TaskSpec(kind=kind, path=str(folder / file), max_examples=max_examples)
        for kind, file in DEFAULT_FILES.items()
    )


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataError(f"{path}:{number} is not JSON: {exc}") from exc
    except (EOFError, OSError, zlib.error, UnicodeDecodeError) as exc:  # BadGzipFile: OSError
        raise DataError(unreadable_message(path, number, exc)) from exc


def _hellaswag(row: dict[str, Any]) -> MultipleChoice:
    endings = tuple(" " + e for e in row["endings"])
    return MultipleChoice(context=row["query"], choices=endings, gold=int(row["label"]))


def _arc(row: dict[str, Any]) -> MultipleChoice:
    question = row["question"]
    labels = [c["label"] for c in question["choices"]]
    if row["answerKey"] not in labels:
        raise KeyError(f"answerKey {row['answerKey']!r} not among labels {labels}")
    return MultipleChoice(
        context=f"Question: {question['stem']}\nAnswer:",
        choices=tuple(" " + c["text"] for c in question["choices"]),
        gold=labels.index(row["answerKey"]),
    )


def _blimp(row: dict[str, Any]) -> MultipleChoice:
    return MultipleChoice(context="", choices=(row["sentence_good"], row["sentence_bad"]), gold=0)


_PARSERS = {"hellaswag": _hellaswag, "arc_easy": _arc, "blimp": _blimp}


def load_task(spec: TaskSpec, seed: int = 0) -> list[MultipleChoice] | None:
    """The examples of ``spec`` (at most ``max_examples``), or None when its file is absent.

    A malformed row raises :class:`DataError` naming the file and row: a task file is curated
    input, so a bad row means the wrong file, not noise to skip. So does a file cut short or
    not gzip, and a cached file whose sha256 no longer matches ``SOURCES.json``."""
    path = Path(spec.path)
    if not path.is_file():
        return None
    verify_eval_file(path)  # a cached file changed since it was fetched: DataError
    parse = _PARSERS[spec.kind]
    examples = []
    for number, row in enumerate(_lines(path), 1):
        try:
            examples.append(parse(row))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(
                f"{path}: row {number} does not have the {spec.kind} schema ({exc!r}); "
                f"point TaskSpec(kind={spec.kind!r}) at a {spec.kind} file"
            ) from exc
    if not examples:
        raise DataError(f"{path}: no examples; point TaskSpec.path at a non-empty task file")
    if len(examples) > spec.max_examples:
        keep = sorted(random.Random(seed).sample(range(len(examples)), spec.max_examples))
        examples = [examples[i] for i in keep]
    for ex in examples:
        if not 0 <= ex.gold < len(ex.choices) or len(ex.choices) < 2:
            raise DataError(f"{path}: example with gold {ex.gold} and {len(ex.choices)} choices")
    return examples
