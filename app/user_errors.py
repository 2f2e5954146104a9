"""How the ``pretrain`` command and ``make demo`` end on a user error: one line, no traceback.

A :class:`~pretrain.errors.PretrainError` (``ConfigError``, ``DataError``, ``CheckpointError``)
is raised on purpose, with a message that names the input and says what to do: it is printed
as one line on stderr and the command exits with status 1. Anything else is a bug and keeps
its traceback::

    sys.exit(report_user_errors("data", cmd_data, args))
    # stderr: pretrain data: error: no JSONL/Parquet/WARC/text files under /data/x ...

A file a command skips (a spec it cannot read, in ``pretrain experiments list``) is reported the
same way, one line on stderr: ``pretrain <command>: warning: <what, where, what to do>``
(:func:`warning_printer`).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any

from pretrain.errors import PretrainError


def report_user_errors(command: str, run: Callable[..., int | None], *args: Any) -> int:
    """``run(*args)``'s exit status; a user error becomes one line on stderr and status 1."""
    # Dagster's notes on its own preview/beta APIs are for us, not for the user's console
    warnings.filterwarnings("ignore", category=Warning, module=r"dagster(_shared)?(\.|$)")
    try:
        return run(*args) or 0
    except Exception as exc:
        reason = user_error(exc)
        if reason is None:
            raise  # a bug: its traceback is what helps
        print(f"pretrain {command}: error: {one_line(reason)}", file=sys.stderr, flush=True)
        return 1


def user_error(exc: BaseException) -> PretrainError | None:
    """``exc`` itself or the error it was raised from, if that is a user error (a step that
    failed on bad input raises Dagster's ``Failure`` from the library's ``DataError``)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, PretrainError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__
    return None


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` with its line breaks folded: one line on the console."""
    return one_line_text(str(exc)) or type(exc).__name__


def warning_printer(command: str) -> Callable[[str], None]:
    """A ``warn`` callback that prints each warning as one line on stderr."""

    def warn(message: str) -> None:
        print(f"pretrain {command}: warning: {one_line_text(message)}", file=sys.stderr, flush=True)

    return warn


def one_line_text(text: str) -> str:
    return " ".join(text.split())
