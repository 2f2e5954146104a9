"""Decontamination: find training documents that share an n-gram with evaluation sets.

Text is normalized to lower-case word tokens (``\\w+``), so punctuation and WikiText's
tokenized spacing (``1 @,@ 000``) do not hide a match. Every run of ``ngram`` consecutive words
is hashed to 64 bits (a per-word blake2b hash combined polynomially with numpy); a training
document is contaminated when one of its n-gram hashes is in the evaluation set. Evaluation
items shorter than ``ngram`` words cannot be matched this way and are counted, not hidden.

Evaluation files are read by format, picked from the file name:

| name contains | format    | items                                                        |
|---------------|-----------|--------------------------------------------------------------|
| ``hellaswag`` | JSONL     | ``query + " " + ending`` for each ending                     |
| ``arc``       | JSONL     | ``question.stem + " " + choice.text`` for each choice        |
| ``blimp``     | JSONL     | ``sentence_good`` and ``sentence_bad``                       |
| ``wikitext``  | text      | each line, cut at ``<unk>`` (a placeholder, not the word)    |
| other         | JSONL/text| the ``text`` field of each record, or each line              |

Usage::

    from pretrain.decontam import DecontamConfig, EvalNgrams
    ngrams = EvalNgrams.load(DecontamConfig())   # the task files `pretrain evals fetch` put in the cache
    ngrams.matches("... a document ...")     # names of the eval sets it overlaps, e.g. ["hellaswag_val_10042"]
    ngrams.report()                          # items, n-grams, too-short items, missing files per set

Files may be ``.gz``, ``.zst`` or plain. A file listed in its folder's ``SOURCES.json`` (what
``pretrain evals fetch`` downloaded) must still have the recorded sha256: one edited or damaged
since is a ``DataError``, never used silently. Bare file names (the default) are read from the eval
task cache, the same folder the eval asset scores from: ``DecontamConfig.eval_dir``, or
``$PRETRAIN_EVAL_DIR`` / ``~/.cache/pretrain/eval`` (filled by ``pretrain evals fetch``, see
:mod:`pretrain.eval.fetch`). A configured file that does not exist raises ``DataError`` unless
``skip_missing=True``; skipped files are listed in the report, and when *no* file was found the
report carries a ``warning`` (the mixture repeats it among its warnings and logs it): nothing
was decontaminated.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pretrain.errors import ConfigError, DataError
from pretrain.eval_cache import default_eval_dir, unreadable_message, verify_eval_file
from pretrain.settings import check_types

DEFAULT_EVAL_FILES = (  # bare names: read from the eval task cache (see eval_dir)
    "hellaswag_val_10042.jsonl.gz",
    "arc_easy_dev_570.jsonl.gz",
    "blimp_67paradigms_67000pairs.jsonl.gz",
    "wikitext2_valid.tokens.txt.gz",
)
log = logging.getLogger(__name__)
_WORD = re.compile(r"\w+")
_MULT = np.uint64(0x9E3779B97F4A7C15)  # odd constant: position weights never collapse to 0


@dataclass(frozen=True, kw_only=True)
class DecontamConfig:
    """Which evaluation files to protect and the n-gram length (13 as in GPT-3)."""

    eval_files: tuple[str, ...] = DEFAULT_EVAL_FILES
    ngram: int = 13
    skip_missing: bool = False
    eval_dir: str = ""  # folder for bare names; "" = $PRETRAIN_EVAL_DIR or ~/.cache/pretrain/eval

    def resolved_files(self) -> tuple[str, ...]:
        """``eval_files`` with bare names placed in the eval task folder."""
        folder = Path(self.eval_dir) if self.eval_dir else default_eval_dir()
        return tuple(p if "/" in p else str(folder / p) for p in self.eval_files)

    def __post_init__(self) -> None:
        check_types(self)
        if self.ngram < 3:
            raise ConfigError(f"DecontamConfig.ngram={self.ngram} must be >= 3; 13 is standard")
        if isinstance(self.eval_files, str):
            raise ConfigError("DecontamConfig.eval_files must be a tuple of paths, not one string")


class _WordHasher:
    """Stable 64-bit word hashes (blake2b), cached per word."""

    def __init__(self) -> None:
        self._cache: dict[str, int] = {}

    def __call__(self, text: str) -> np.ndarray:
        words = _WORD.findall(text.lower())
        cache = self._cache
        out = np.empty(len(words), dtype=np.uint64)
        for i, w in enumerate(words):
            h = cache.get(w)
            if h is None:
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                cache[w] = h
            out[i] = h
        return out


def ngram_hashes(word_hashes: np.ndarray, n: int) -> np.ndarray:
    """uint64 hash of every run of ``n`` consecutive words (empty when fewer than ``n``)."""
    count = len(word_hashes) - n + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    acc = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):  # arithmetic mod 2**64 is intended
            acc = acc * _MULT + word_hashes[k : k + count]
    return acc


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    if path.suffix == ".zst":
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(path.open("rb"))
        return io.TextIOWrapper(raw, encoding="utf-8")
    return path.open(encoding="utf-8")


def eval_format(path: str) -> str:
    """The reader used for ``path`` (see the module table)."""
    name = Path(path).name.lower()
    for fmt in ("hellaswag", "arc", "blimp", "wikitext"):
        if fmt in name:
            return fmt
    return "jsonl" if ".jsonl" in name else "text"


def iter_eval_items(path: str) -> Iterator[str]:
    """The texts of one evaluation file, per its format; a file that cannot be read to its
    end, a line that is not JSON or a record without the format's fields is a DataError
    naming the file (and the line)."""
    fmt = eval_format(path)
    number = 0
    try:
        with _open_text(Path(path)) as f:
            for number, line in enumerate(f, 1):
                if fmt in ("wikitext", "text"):
                    yield from line.split("<unk>") if fmt == "wikitext" else [line]
                    continue
                if line.strip():
                    yield from _record_items(path, number, line, fmt)
    except (EOFError, OSError, zlib.error, UnicodeDecodeError) as exc:  # BadGzipFile: OSError
        raise DataError(unreadable_message(path, number, exc)) from exc
    except Exception as exc:
        if type(exc).__name__ != "ZstdError":
            raise
        raise DataError(unreadable_message(path, number, exc)) from exc


def _record_items(path: str, number: int, line: str, fmt: str) -> list[str]:
    try:
        record = json.loads(line)
        if fmt == "hellaswag":
            return [f"{record['query']} {e}" for e in record["endings"]]
        if fmt == "arc":
            stem = record["question"]["stem"]
            return [f"{stem} {c['text']}" for c in record["question"]["choices"]]
        if fmt == "blimp":
            return [record["sentence_good"], record["sentence_bad"]]
        return [record["text"]]
    except json.JSONDecodeError as exc:
        raise DataError(
            f"eval file {path}, line {number} is not JSON ({exc.msg}): the file is damaged; "
            "replace it (`pretrain evals fetch --force` for the cached tasks)"
        ) from exc
    except (KeyError, TypeError, AttributeError) as exc:
        raise DataError(
            f"eval file {path}, line {number} does not have the {fmt} fields ({exc!r}); "
            "name a file of that format, or rename it (the format comes from the file name)"
        ) from exc


def eval_set_name(path: str) -> str:
    name = Path(path).name
    for suffix in (".gz", ".zst", ".jsonl", ".txt", ".tokens"):
        name = name.removesuffix(suffix)
    return name


@dataclass(frozen=True, kw_only=True)
class EvalSetReport:
    file: str
    items: int
    items_too_short: int  # fewer words than ``ngram``: cannot be matched
    ngrams: int


@dataclass
class EvalNgrams:
    """Sorted n-gram hashes of every configured evaluation set."""

    ngram: int
    sets: dict[str, np.ndarray] = field(default_factory=dict)
    reports: dict[str, EvalSetReport] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    _hasher: _WordHasher = field(default_factory=_WordHasher)

    @classmethod
    def load(cls, config: DecontamConfig) -> EvalNgrams:
        files = config.resolved_files()
        missing = tuple(p for p in files if not Path(p).is_file())
        if missing and not config.skip_missing:
            raise DataError(
                f"evaluation files not found: {list(missing)}; fix the paths, or set "
                "skip_missing=True to decontaminate against the files that exist"
            )
        out = cls(ngram=config.ngram, missing=missing)
        if files and len(missing) == len(files):
            log.warning(out.warning())
        for path in files:
            if path in missing:
                continue
            verify_eval_file(path)  # a cached file changed since it was fetched: DataError
            name = eval_set_name(path)
            if name in out.sets:
                raise ConfigError(f"two eval files are both named '{name}'; rename one")
            chunks, items, short = [], 0, 0
            for text in iter_eval_items(path):
                grams = ngram_hashes(out._hasher(text), config.ngram)
                items += 1
                short += len(grams) == 0
                chunks.append(grams)
            hashes = np.unique(np.concatenate(chunks)) if chunks else np.empty(0, np.uint64)
            out.sets[name] = hashes
            out.reports[name] = EvalSetReport(
                file=path, items=items, items_too_short=short, ngrams=len(hashes)
            )
        return out

    def matches(self, text: str) -> list[str]:
        """Names of the evaluation sets sharing at least one n-gram with ``text``."""
        grams = ngram_hashes(self._hasher(text), self.ngram)
        if len(grams) == 0:
            return []
        hits = []
        for name, hashes in self.sets.items():
            if len(hashes) == 0:
                continue
            pos = np.searchsorted(hashes, grams).clip(max=len(hashes) - 1)
            if bool((hashes[pos] == grams).any()):
                hits.append(name)
        return hits

    def warning(self) -> str:
        return (
            f"DECONTAMINATION CHECKED NOTHING: none of the evaluation files exist "
            f"({', '.join(self.missing)}); training data was not checked against any eval set. "
            "Run `pretrain evals fetch` (or set PRETRAIN_EVAL_DIR) and rebuild the mixture"
        )

    def report(self) -> dict:
        out = {
            "ngram": self.ngram,
            "sets": {name: vars(r) for name, r in self.reports.items()},
            "missing_files": list(self.missing),
            "checked_against": sorted(self.sets),
        }
        if not self.sets:
            out["warning"] = self.warning() if self.missing else "no evaluation files configured"
        return out
