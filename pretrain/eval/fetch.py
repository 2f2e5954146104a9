"""Download the evaluation tasks from the Hugging Face Hub into a local cache, hash-checked.

HellaSwag, ARC-Easy, BLiMP and WikiText-2 are fetched with ``huggingface_hub`` from their
public dataset repositories and converted to the files that :mod:`pretrain.eval.tasks` and
:mod:`pretrain.decontam` read, in :func:`pretrain.eval_cache.default_eval_dir` (``$PRETRAIN_EVAL_DIR``, else
``$XDG_CACHE_HOME/pretrain/eval``, else ``~/.cache/pretrain/eval``)::

    pretrain evals fetch                         # or: python -m pretrain.eval.fetch
    PRETRAIN_EVAL_DIR=/data/evals pretrain evals fetch
    HF_ENDPOINT=http://mirror.local pretrain evals fetch   # a Hub mirror

Hashes: a source file with a pinned ``sha256`` must match it; otherwise it must match the
sha256 the Hub reports for it (the LFS object id, ``X-Linked-Etag``). ``SOURCES.json`` in the
cache records every source's repo, revision, commit and sha256 and the sha256 of each
converted file; :func:`pretrain.eval_cache.verify_eval_dir` re-checks them, so a file changed in the cache is
caught before it is scored or used for decontamination. Offline, :func:`fetch_eval_tasks`
downloads nothing and its report says so in one line.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pretrain import storage
from pretrain.errors import DataError
from pretrain.eval_cache import MANIFEST, default_eval_dir, read_manifest, sha256_file


@dataclass(frozen=True, kw_only=True)
class HubFile:
    """One file of a Hub dataset repo (``revision`` may be a branch, tag or commit)."""

    repo_id: str
    path: str
    revision: str = "main"
    sha256: str | None = None  # pinned content hash, when known


@dataclass(frozen=True, kw_only=True)
class HubTask:
    """A task: the Hub files it is built from and the cache file it becomes."""

    name: str
    output: str  # file name in the eval dir (what tasks.py / decontam.py read)
    files: tuple[HubFile, ...]
    convert: str  # key of _CONVERTERS


BLIMP_PARADIGMS = tuple(
    """adjunct_island anaphor_gender_agreement anaphor_number_agreement animate_subject_passive
    animate_subject_trans causative complex_NP_island
    coordinate_structure_constraint_complex_left_branch
    coordinate_structure_constraint_object_extraction determiner_noun_agreement_1
    determiner_noun_agreement_2 determiner_noun_agreement_irregular_1
    determiner_noun_agreement_irregular_2 determiner_noun_agreement_with_adj_2
    determiner_noun_agreement_with_adj_irregular_1 determiner_noun_agreement_with_adj_irregular_2
    determiner_noun_agreement_with_adjective_1 distractor_agreement_relational_noun
    distractor_agreement_relative_clause drop_argument ellipsis_n_bar_1 ellipsis_n_bar_2
    existential_there_object_raising existential_there_quantifiers_1
    existential_there_quantifiers_2 existential_there_subject_raising expletive_it_object_raising
    inchoative intransitive irregular_past_participle_adjectives irregular_past_participle_verbs
    irregular_plural_subject_verb_agreement_1 irregular_plural_subject_verb_agreement_2
    left_branch_island_echo_question left_branch_island_simple_question
    matrix_question_npi_licensor_present npi_present_1 npi_present_2 only_npi_licensor_present
    only_npi_scope passive_1 passive_2 principle_A_c_command principle_A_case_1
    principle_A_case_2 principle_A_domain_1 principle_A_domain_2 principle_A_domain_3
    principle_A_reconstruction regular_plural_subject_verb_agreement_1
    regular_plural_subject_verb_agreement_2 sentential_negation_npi_licensor_present
    sentential_negation_npi_scope sentential_subject_island superlative_quantifiers_1
    superlative_quantifiers_2 tough_vs_raising_1 tough_vs_raising_2 transitive wh_island
    wh_questions_object_gap wh_questions_subject_gap wh_questions_subject_gap_long_distance
    wh_vs_that_no_gap wh_vs_that_no_gap_long_distance wh_vs_that_with_gap
    wh_vs_that_with_gap_long_distance""".split()
)

HUB_TASKS = (
    HubTask(
        name="hellaswag",
        output="hellaswag_val_10042.jsonl.gz",
        # the Hub's own Parquet conversion of the validation split (the repo's main branch
        # holds a loading script)
        files=(
            HubFile(
                repo_id="Rowan/hellaswag",
                path="default/validation/0000.parquet",
                revision="refs/convert/parquet",
            ),
        ),
        convert="hellaswag",
    ),
    HubTask(
        name="arc_easy",
        output="arc_easy_dev_570.jsonl.gz",
        files=(
            HubFile(
                repo_id="allenai/ai2_arc",
                path="ARC-Easy/validation-00000-of-00001.parquet",
                revision="4d4ed1b0a54f45df33cd8eb45c157cc00cdaf35e",  # "Add ARC-Easy data files"
                sha256="ed890ff1e4cef7a7140d3a30dcea3ed2c9d467c6458f447ad9ef0176d8dcbb74",
            ),
        ),
        convert="arc",
    ),
    HubTask(
        name="blimp",
        output="blimp_67paradigms_67000pairs.jsonl.gz",
        files=tuple(
            HubFile(repo_id="nyu-mll/blimp", path=f"{p}/train-00000-of-00001.parquet")
            for p in BLIMP_PARADIGMS
        ),
        convert="blimp",
    ),
    HubTask(
        name="wikitext",
        output="wikitext2_valid.tokens.txt.gz",
        files=(
            HubFile(
                repo_id="Salesforce/wikitext",
                path="wikitext-2-v1/validation-00000-of-00001.parquet",
            ),
        ),
        convert="wikitext",
    ),
)


@dataclass
class FetchReport:
    """What became of each task: every task is in exactly one of the four."""

    eval_dir: str
    fetched: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # files put there by hand (not verified)
    failed: dict[str, str] = field(default_factory=dict)  # task → why
    offline: bool = False  # every task that had to be downloaded found the Hub unreachable

    def line(self) -> str:
        """One line for the console: each task, ready or not, and why not."""
        ready = sorted(self.fetched + self.cached + self.present)
        if self.offline:
            return (
                f"evals fetch: the Hugging Face Hub is unreachable (offline?): downloaded "
                f"nothing; ready in {self.eval_dir}: {', '.join(ready) or 'none'}; not "
                f"downloaded: {', '.join(sorted(self.failed))}; tasks without files are "
                "reported as skipped (set HF_ENDPOINT for a mirror)"
            )
        failed = "; ".join(f"{k}: {v}" for k, v in sorted(self.failed.items()))
        return (
            f"evals fetch: {len(ready)}/{len(ready) + len(self.failed)} tasks ready in "
            f"{self.eval_dir} (downloaded {', '.join(sorted(self.fetched)) or 'none'}; cached "
            f"{', '.join(sorted(self.cached)) or 'none'}"
            + (
                f"; present, not from the Hub: {', '.join(sorted(self.present))}"
                if self.present
                else ""
            )
            + ")"
            + (f"; FAILED {failed}" if failed else "")
        )


def fetch_eval_tasks(
    eval_dir: str | Path | None = None,
    *,
    tasks: tuple[HubTask, ...] = HUB_TASKS,
    endpoint: str | None = None,
    force: bool = False,
) -> FetchReport:
    """Make every task file of ``tasks`` present and verified in ``eval_dir``."""
    root = Path(eval_dir) if eval_dir is not None else default_eval_dir()
    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    report = FetchReport(eval_dir=str(root))
    manifest = read_manifest(root)
    unreachable = 0
    for task in tasks:  # a task that fails is reported and the next one is tried
        entry = manifest.get(task.name)
        if not force and entry and sha256_file(root / task.output) == entry.get("sha256"):
            report.cached.append(task.name)
            continue
        if not force and not entry and (root / task.output).is_file():
            report.present.append(task.name)  # someone's own copy: never overwritten unasked
            continue
        try:
            sources = [_download(f, root / "hub", endpoint) for f in task.files]
            data = _convert(task, [Path(s.pop("local")) for s in sources])
        except _Offline as exc:
            unreachable += 1
            report.failed[task.name] = f"the Hub is unreachable ({_first_line(exc)})"
            continue
        except DataError as exc:
            report.failed[task.name] = str(exc)
            continue
        storage.write_bytes(data, str(root / task.output))
        manifest[task.name] = {
            "output": task.output,
            "sha256": hashlib.sha256(data).hexdigest(),
            "sources": sources,
        }
        storage.write_json(manifest, str(root / MANIFEST))
        report.fetched.append(task.name)
    report.offline = unreachable > 0 and unreachable == len(report.failed) and not report.fetched
    return report


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def _convert(task: HubTask, paths: list[Path]) -> bytes:
    """The task file from its downloaded sources; a source it cannot convert is a DataError."""
    try:
        return _CONVERTERS[task.convert](paths)
    except DataError:
        raise
    except Exception as exc:  # pyarrow, a missing column, a wrong type: the file is not the task's
        raise DataError(
            "the downloaded files could not be converted "
            f"({type(exc).__name__}: {_first_line(exc)}); the repo's layout may have changed"
        ) from exc


class _Offline(Exception):
    pass


def _download(spec: HubFile, cache: Path, endpoint: str | None) -> dict[str, Any]:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{spec.repo_id}@{spec.revision}:{spec.path}"
    try:
        url = hf_hub_url(
            spec.repo_id, spec.path, repo_type="dataset", revision=spec.revision,
            endpoint=endpoint,
        )  # fmt: skip
        meta = get_hf_file_metadata(url)
        local = hf_hub_download(
            spec.repo_id, spec.path, repo_type="dataset", revision=spec.revision,
            cache_dir=cache, endpoint=endpoint,
        )  # fmt: skip
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
        raise DataError(f"{where} is not on the Hub: {type(exc).__name__}") from exc
    except HfHubHTTPError as exc:  # the Hub answered, with an error (an OSError: test it first)
        raise DataError(f"{where}: the Hub answered {_first_line(exc)}") from exc
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, OSError) as exc:
        raise _Offline(str(exc)) from exc
    except Exception as exc:  # httpx transport errors (connection refused, DNS) vary by version
        if "Connect" in type(exc).__name__ or "Timeout" in type(exc).__name__:
            raise _Offline(str(exc)) from exc
        # any other answer (a server error, a broken transfer): this task fails, others go on
        raise DataError(f"{where}: {type(exc).__name__}: {_first_line(exc)}") from exc
    digest = sha256_file(Path(local))
    expected = spec.sha256 or (meta.etag if meta.etag and _SHA256.fullmatch(meta.etag) else None)
    if expected is None:
        raise DataError(f"{where}: the Hub gave no sha256 to check it against; pin HubFile.sha256")
    if digest != expected:
        Path(local).unlink(missing_ok=True)
        raise DataError(f"{where}: sha256 {digest} != expected {expected}: refusing the file")
    return {
        "repo_id": spec.repo_id, "path": spec.path, "revision": spec.revision,
        "commit": meta.commit_hash, "sha256": digest, "local": local,
    }  # fmt: skip


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _rows(paths: list[Path]) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return [row for p in paths for row in pq.read_table(p).to_pylist()]


def _jsonl_gz(rows: list[dict[str, Any]]) -> bytes:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return gzip.compress(text.encode(), mtime=0)


def _hellaswag_text(text: str) -> str:
    # lm-evaluation-harness's cleaning of WikiHow artefacts ("[title]", "[step]")
    text = text.strip().replace(" [title]", ". ")
    return re.sub(r"\[.*?\]", "", text).replace("  ", " ")


def _convert_hellaswag(paths: list[Path]) -> bytes:
    return _jsonl_gz([
        {
            "ind": row["ind"],
            "query": _hellaswag_text(f"{row['activity_label']}: {row['ctx']}"),
            "label": int(row["label"]),
            "endings": [_hellaswag_text(e) for e in row["endings"]],
        }
        for row in _rows(paths)
    ])  # fmt: skip


def _convert_arc(paths: list[Path]) -> bytes:
    return _jsonl_gz([
        {
            "id": row["id"],
            "question": {
                "stem": row["question"],
                "choices": [
                    {"text": t, "label": lab}
                    for t, lab in zip(row["choices"]["text"], row["choices"]["label"], strict=True)
                ],
            },
            "answerKey": row["answerKey"],
        }
        for row in _rows(paths)
    ])  # fmt: skip


def _convert_blimp(paths: list[Path]) -> bytes:
    return _jsonl_gz(_rows(paths))


def _convert_wikitext(paths: list[Path]) -> bytes:
    out = io.StringIO()
    for row in _rows(paths):
        line = row["text"]  # the Hub's rows keep each line's "\n"; blank lines are ""
        out.write(line if line.endswith("\n") else (line or " ") + "\n")
    return gzip.compress(out.getvalue().encode(), mtime=0)


_CONVERTERS = {
    "hellaswag": _convert_hellaswag,
    "arc": _convert_arc,
    "blimp": _convert_blimp,
    "wikitext": _convert_wikitext,
}


def main(argv: list[str] | None = None) -> int:
    """``python -m pretrain.eval.fetch [--dir D] [--force]``: exit 0 when every task is ready."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="cache folder (default: $PRETRAIN_EVAL_DIR)")
    parser.add_argument("--force", action="store_true", help="download again even if cached")
    args = parser.parse_args(argv)
    report = fetch_eval_tasks(args.dir, force=args.force)
    print(report.line(), flush=True)
    return 0 if not report.offline and not report.failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
