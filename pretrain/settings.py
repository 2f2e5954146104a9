"""Settings as the library defines them: field docs and command-line options from config dataclasses.

Each stage's frozen config dataclass is the one definition of its settings. This module derives
command-line options from it (the Dagster Launchpad's config is derived the same way, in
``foundation/config.py``)::

    parser = argparse.ArgumentParser()
    add_options(parser, "filter", FilterConfig, exclude=("quality_model_uri",))
    args = parser.parse_args(["--filter.langid.min_score", "0.5", "--filter.urls", "null"])
    chosen(args, "filter")          # {"langid": {"min_score": 0.5}, "urls": None}

Every leaf field is an option ``--<prefix>.<path>`` (nested dataclasses by dots); an optional
nested section also takes ``null`` (switch it off). Values are parsed strictly by the field's
type: ``true``/``false`` for booleans, JSON for lists and mappings, ``null`` for ``None``.
Only options given on the command line appear in :func:`chosen`. Each option's help is its
field's own comment (or the one sentence of the class docstring that names it) and its default,
as the command line writes it.

Every library config dataclass calls :func:`check_types` first thing in ``__post_init__``, so a
wrong-typed value is refused where the config is made, whoever makes it (Python, the
Launchpad, a JSON file)::

    DedupConfig(url_dedup="false")
    # ConfigError: DedupConfig.url_dedup must be a boolean (true/false), got str 'false'
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal

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


NO_DEFAULT = object()  # a field the dataclass needs given (or a section that is off by default)


def _field_default(field: dataclasses.Field, section: Any) -> Any:
    """``field``'s default: its value in ``section`` (the default of the enclosing section),
    else the dataclass's own default (``NO_DEFAULT`` when it has none)."""
    if section is not NO_DEFAULT:
        return NO_DEFAULT if section is None else getattr(section, field.name)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return NO_DEFAULT


def _leaves(
    cls: type, exclude: tuple[str, ...], path: tuple[str, ...] = (), section: Any = NO_DEFAULT
) -> Iterator[tuple[tuple[str, ...], Any, str, Any]]:
    """(path, hint, doc, default) of every leaf field of ``cls``; ``section`` is the default
    instance of ``cls`` where it is a nested section (``None``: the section is off)."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for field in dataclasses.fields(cls):
        dotted = ".".join((*path, field.name))
        if dotted in exclude or not field.init:
            continue
        inner, optional = _optional_inner(hints[field.name])
        default = _field_default(field, section)
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):  # hints are classes
            if optional:
                doc = docs.get(field.name) or "the section's settings"
                yield (*path, field.name), None, f"{doc}; null switches it off", default
            yield from _leaves(inner, exclude, (*path, field.name), default)
        else:
            yield (*path, field.name), hints[field.name], docs.get(field.name, ""), default


def shown(value: Any) -> str:
    """A default as the command line writes it: ``true``, ``null``, ``[0, 1]``, ``proxy_cpu``."""
    if value is NO_DEFAULT:
        return "none: set it when the section is used"
    if isinstance(value, str):
        return value or '""'
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "on"
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return repr(value)


def add_options(
    parser: argparse.ArgumentParser,
    prefix: str,
    cls: type,
    exclude: tuple[str, ...] = (),
    *,
    defaults: str | None = None,
) -> None:
    """Add ``--<prefix>.<field path>`` for every field of ``cls`` (see the module docstring).
    ``defaults`` replaces the dataclass's defaults in the help (``"the recipe's"`` where every
    option overrides a recipe)."""
    group = parser.add_argument_group(f"{prefix} settings ({cls.__name__})")
    for path, hint, doc, default in _leaves(cls, exclude):
        name = ".".join((prefix, *path))
        if hint is None:  # an optional section: only null
            metavar, parse = "null", _parser(type(None) | None, name)
        else:
            inner = _optional_inner(hint)[0]
            metavar = inner.__name__ if inner in (bool, int, float, str) else "JSON"
            parse = _parser(hint, name)
        told = defaults or shown(default)
        group.add_argument(
            f"--{name}",
            dest=f"setting:{name}",
            metavar=metavar.upper() if metavar != "null" else metavar,
            default=argparse.SUPPRESS,
            type=parse,
            help=f"{doc} (default: {told})".lstrip().replace("%", "%%"),
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


# -- type checks of config dataclasses ------------------------------------------------------------
# JSON scalar -> the hint it may fill. Strict on purpose: a bool never stands in for a number
# (``True`` is an int in Python), a string never for a bool ("false" is truthy) or a number.
SCALARS: dict[Any, tuple[str, Any]] = {
    bool: ("a boolean (true/false)", lambda v: isinstance(v, bool)),
    int: ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    float: ("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)),
    str: ("a string", lambda v: isinstance(v, str)),
}


def describe(value: Any) -> str:
    """``str '200'``, ``null``, ``bool True``: what a type error message shows of a value."""
    if value is None:
        return "null"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return {
        name: hint
        for name, hint in typing.get_type_hints(cls).items()
        if name in {f.name for f in dataclasses.fields(cls)}
    }


def check_types(config: Any) -> None:
    """Refuse a field whose value does not have its annotated type (ConfigError naming the
    class, the field and the value); lists given for ``tuple`` fields become tuples.

    Call it first in a config dataclass's ``__post_init__`` (before range checks, which would
    otherwise fail with a bare ``TypeError`` on ``"3" < 1``)."""
    cls: type = type(config)
    for name, hint in _hints(cls).items():
        value = getattr(config, name)
        fixed = _checked(hint, value, f"{cls.__name__}.{name}")
        if fixed is not value:
            object.__setattr__(config, name, fixed)


def _checked(hint: Any, value: Any, where: str) -> Any:
    """``value`` if it fits ``hint`` (a list for a tuple comes back as a tuple), else
    ConfigError. Hints this does not know (protocols, callables) are not checked."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _checked(inner[0], value, where)
        for option in inner:  # a wider union: the first member that fits
            try:
                return _checked(option, value, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where} must be one of {hint}, got {describe(value)}")
    if value is None:
        raise ConfigError(f"{where} must not be null (it needs a value of type {_name(hint)})")
    if hint in SCALARS:
        expected, accepts = SCALARS[hint]
        if not accepts(value):
            raise ConfigError(f"{where} must be {expected}, got {describe(value)}")
        return value
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where} must be one of {list(args)}, got {describe(value)}")
        return value
    if origin is tuple:
        if not isinstance(value, tuple | list):
            raise ConfigError(f"{where} must be a tuple (a list in JSON), got {describe(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            items = [_checked(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        elif args:
            if len(value) != len(args):
                raise ConfigError(
                    f"{where} must be a list of {len(args)} values, got {describe(value)}"
                )
            items = [
                _checked(a, v, f"{where}[{i}]")
                for i, (a, v) in enumerate(zip(args, value, strict=True))
            ]
        else:
            items = list(value)
        same = isinstance(value, tuple) and all(a is b for a, b in zip(items, value, strict=True))
        return value if same else tuple(items)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be a list, got {describe(value)}")
        for i, v in enumerate(value):
            _checked(args[0], v, f"{where}[{i}]")
        return value
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {describe(value)}")
        for k, v in value.items():
            _checked(args[0], k, f"{where} key {k!r}")
            _checked(args[1], v, f"{where}[{k!r}]")
        return value
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, hint):
            raise ConfigError(f"{where} must be a {hint.__name__}, got {describe(value)}")
        return value
    return value


def _name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)
