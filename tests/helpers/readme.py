"""The README's shell commands, as a user copies them: every fenced ``bash`` block, split into
the commands a shell would run.

    for command in readme_commands():
        command.text      # comments dropped, whitespace collapsed: how tests name it
        command.shell     # what to give ``bash -c`` (continuation lines joined)
        command.argv      # its words, as the shell splits them
        command.exports   # the ``export NAME=VALUE`` lines of its block (its environment)
    readme_command(".venv/bin/pretrain demo --filter.")   # the one command with this start

A command ends at the end of a line, unless the line ends with ``\\`` or a quote is still open
(a JSON object over several lines); a ``#`` outside quotes starts a comment; blank and
comment-only lines are not commands.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class ReadmeCommand:
    text: str
    shell: str
    argv: tuple[str, ...]
    line: int  # where it starts in the README (1-based)
    section: str  # the heading above it
    exports: dict[str, str] = field(default_factory=dict, compare=False)


def _strip_comment(line: str, quote: str | None) -> tuple[str, str | None]:
    """``line`` without its comment, and the quote still open at its end (None: none)."""
    out, i = [], 0
    while i < len(line):
        char = line[i]
        if quote is None and char == "#" and (i == 0 or line[i - 1].isspace()):
            break
        if char == "\\" and quote != "'" and i + 1 < len(line):
            out.append(line[i : i + 2])
            i += 2
            continue
        if char in "'\"" and quote in (None, char):
            quote = None if quote == char else char
        out.append(char)
        i += 1
    return "".join(out).rstrip() if quote is None else "".join(out), quote


def _commands_of_block(lines: list[tuple[int, str]], section: str) -> list[ReadmeCommand]:
    commands: list[ReadmeCommand] = []
    pending: list[str] = []
    start, quote = 0, None
    for number, raw in lines:
        text, quote = _strip_comment(raw, quote)
        if not pending and not text.strip():
            continue  # a blank or comment-only line
        if not pending:
            start = number
        pending.append(text)
        if quote is not None or text.endswith("\\"):
            continue  # the command goes on on the next line
        shell = "\n".join(pending).replace("\\\n", " ")
        argv = tuple(shlex.split(shell))
        commands.append(
            ReadmeCommand(text=" ".join(shell.split()), shell=shell.strip(), argv=argv,
                          line=start, section=section)
        )  # fmt: skip
        pending = []
    if pending:
        raise ValueError(f"README line {start}: a command with an open quote or a trailing \\")
    exports = dict(c.argv[1].split("=", 1) for c in commands if c.argv[0] == "export")
    return [dataclasses.replace(c, exports=exports) for c in commands]


def parse_commands(markdown: str) -> list[ReadmeCommand]:
    """Every command of every fenced ``bash`` block of ``markdown``, in order."""
    commands: list[ReadmeCommand] = []
    block: list[tuple[int, str]] = []
    language: str | None = None  # of the fenced block we are in (None: outside any)
    section = ""
    for number, line in enumerate(markdown.splitlines(), start=1):
        if language is None:
            fence = FENCE.match(line)
            if fence:
                language, block = fence.group(1), []
            elif line.startswith("#"):
                section = line.lstrip("#").strip()
        elif line.startswith("```"):
            if language == "bash":
                commands += _commands_of_block(block, section)
            language = None
        else:
            block.append((number, line))
    return commands


def readme_commands() -> list[ReadmeCommand]:
    return parse_commands(README.read_text(encoding="utf-8"))


def readme_command(start: str) -> ReadmeCommand:
    """The one README command whose text starts with ``start``."""
    found = [c for c in readme_commands() if c.text.startswith(start)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} README commands start with {start!r}: {found}")
    return found[0]
