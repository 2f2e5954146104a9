"""Settings as the library defines them: field docs and command-line options from config dataclasses.

Each stage's frozen config dataclass is the one definition of its settings. This module derives
command-line options from it (the Dagster Launchpad's config is derived the same way, in
``jobs/config.py``)::

    parser = argparse.ArgumentParser()
    add_options(parser, "filter", FilterConfig, exclude=("quality_model_uri",))
    args = parser.parse_args(["--filter.langid.min_score", "0.5", "--filter.urls", "null"])
    chosen(args, "filter")          # {"langid": {"min_score": 0.5}, "urls": None}

Every leaf field is an option ``--<prefix>.<path>`` (nested dataclasses by dots); an optional
nested section also takes ``null`` (switch it off). Values are parsed strictly by the field's
type: ``true``/``false`` for booleans, JSON for lists and mappings, ``null`` for ``None``.
Only options given on the command line appear in :func:`chosen`.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import types
import typing
from typing import Any

from pretrain.errors import ConfigError


def field_docs(cls: type) -> dict[str, str]:
    """``name`` → its trailing comment in the dataclass source, else the first sentence of the
    class docstring that mentions ````name````."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        source = ""
    comments = dict(re.findall(r"^    (\w+): [^#\n]*#\s*(.+)$", source, flags=re.M))
    sentences = re.split(r"(?<=[.;])\s+", " ".join((cls.__doc__ or "").split()))
    docs: dict[str, str] = {}
    for field in dataclasses.fields(cls):
        if field.name in comments:
            docs[field.name] = comments[field.name].strip()
            continue
        for sentence in sentences:
            if f"``{field.name}``" in sentence:
                docs[field.name] = sentence
                break
    return docs


def _optional_inner(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return inner[0], True
    return hint, False


def parse_value(hint: Any, text: str, where: str) -> Any:
    """``text`` from the command line as a value of type ``hint`` (strict)."""
    inner, optional = _optional_inner(hint)
    if optional and text.lower() in ("null", "none"):
        return None
    if inner is bool:
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{where} takes true or false, got {text!r}")
        return text.lower() == "true"
    if inner in (int, float):
        try:
            return inner(text)
        except ValueError:
            raise ConfigError(f"{where} takes a {inner.__name__}, got {text!r}") from None
    if inner is str:
        return text
    try:
        return json.loads(text)  # lists, tuples and mappings as JSON
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} takes JSON ({inner}), got {text!r}: {exc}") from None


def _leaves(cls: type, exclude: tuple[str, ...], path: tuple[str, ...] = ()):
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for field in dataclasses.fields(cls):
        dotted = ".".join((*path, field.name))
        if dotted in exclude or not field.init:
            continue
        inner, optional = _optional_inner(hints[field.name])
        if dataclasses.is_dataclass(inner):
            if optional:
                yield (*path, field.name), None, "null switches this rule family off"
            yield from _leaves(inner, exclude, (*path, field.name))
        else:
            yield (*path, field.name), hints[field.name], docs.get(field.name, "")


def add_options(
    parser: argparse.ArgumentParser, prefix: str, cls: type, exclude: tuple[str, ...] = ()
) -> None:
    """Add ``--<prefix>.<field path>`` for every field of ``cls`` (see the module docstring)."""
    group = parser.add_argument_group(f"{prefix} settings ({cls.__name__})")
    for path, hint, doc in _leaves(cls, exclude):
        name = ".".join((prefix, *path))
        if hint is None:  # an optional section: only null
            metavar, parse = "null", _parser(type(None) | None, name)
        else:
            inner = _optional_inner(hint)[0]
            metavar = inner.__name__ if inner in (bool, int, float, str) else "JSON"
            parse = _parser(hint, name)
        group.add_argument(
            f"--{name}",
            dest=f"setting:{name}",
            metavar=metavar.upper() if metavar != "null" else metavar,
            default=argparse.SUPPRESS,
            type=parse,
            help=doc,
        )


def _parser(hint: Any, name: str) -> Any:
    def parse(text: str) -> Any:
        try:
            return parse_value(hint, text, f"--{name}")
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name
    return parse


def chosen(args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    """The settings given under ``prefix`` as a nested mapping (only what was set)."""
    out: dict[str, Any] = {}
    head = f"setting:{prefix}."
    for dest, value in sorted(vars(args).items()):
        if not dest.startswith(head):
            continue
        *parents, leaf = dest[len(head) :].split(".")
        node = out
        for part in parents:
            if node.get(part, {}) is None:
                raise ConfigError(f"--{dest[8:]} was given, but --{prefix}.{part} is null (off)")
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
