"""Every file the data-value engine reads back, read through one reader.

Specs (``experiment_specs/``), proxy results (``result.json``), operator reviews
(``admission_reviews/``), admission decisions (``decision.json``) and launched-search records
(``mixture_search/launched/``) are JSON files under the artifact root. The engine writes them,
but anyone who can write the root can leave a bad one: a hand edit, a copy cut short, a file
of another tool. :func:`read_record` turns a file that is not JSON, or not the shape its
parser expects, into a ``DataError`` that names the file; :func:`read_records` reads many and
skips a bad one with a warning that names it, so that one bad file never hides the others (a
sensor that raised on it would stop every admission, review and search)::

    spec = read_record(uri, ExperimentSpec.from_dict, "an experiment spec")
    specs = read_records(uris, ExperimentSpec.from_dict, "an experiment spec", warn=log.warning)

A parser takes the decoded JSON value and returns what it holds; a ``KeyError`` (a missing
field), ``TypeError`` or ``ValueError`` (``ConfigError`` included: a record is checked by the
same dataclass that checks a launch) means the file has the wrong shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pretrain import storage
from pretrain.errors import DataError

T = TypeVar("T")
Warn = Callable[[str], None]  # where a skipped file is reported (a sensor's log, stderr)
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError)


def read_record(uri: str, parse: Callable[[Any], T], what: str) -> T:
    """``parse`` of the JSON in ``uri``; a ``DataError`` naming ``uri`` when it is not JSON
    or not ``what`` (e.g. "an experiment spec")."""
    data = storage.read_json(uri)  # a file that is not JSON: a DataError naming it
    try:
        return parse(data)
    except SHAPE_ERRORS as exc:
        raise DataError(f"{uri} is not {what}: {_reason(exc)}; restore it or remove it") from exc


def read_records(
    uris: Iterable[str], parse: Callable[[Any], T], what: str, *, warn: Warn | None
) -> list[tuple[str, T]]:
    """``(uri, record)`` of every file of ``uris`` that reads as ``what``. A bad file raises
    its ``DataError`` when ``warn`` is None; otherwise it is reported through ``warn`` and
    skipped, and the others are still read."""

    def attempt(uri: str) -> T | DataError:
        try:
            return read_record(uri, parse, what)
        except DataError as exc:
            return exc

    listed = list(uris)
    found: list[tuple[str, T]] = []
    for uri, record in zip(listed, storage.map_io(attempt, listed), strict=True):  # at once
        if not isinstance(record, DataError):
            found.append((uri, record))
        elif warn is None:
            raise record
        else:
            warn(f"{record} (skipped)")
    return found


def json_object(data: Any) -> dict[str, Any]:
    """``data`` when it is a JSON object (a ``TypeError`` saying what it is otherwise)."""
    if not isinstance(data, dict):
        raise TypeError(f"a JSON {type(data).__name__}, not an object")
    return data


def strings(data: Any, name: str) -> list[str]:
    """``data`` when it is a JSON list of strings (the field ``name`` of a record)."""
    if not isinstance(data, list) or not all(isinstance(s, str) for s in data):
        raise TypeError(f"{name} must be a list of strings, got {data!r:.60}")
    return data


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]!r}" if exc.args else "a field is missing"
    return " ".join(str(exc).split()) or type(exc).__name__
