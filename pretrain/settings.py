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
from typing import Annotated, Any

import pydantic

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


def optional_inner(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return inner[0], True
    return hint, False


def parse_value(hint: Any, text: str, where: str) -> Any:
    """``text`` from the command line as a value of type ``hint`` (strict)."""
    inner, optional = optional_inner(hint)
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
        inner, optional = optional_inner(hints[field.name])
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
            inner = optional_inner(hint)[0]
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


# What a type error says was wanted, by pydantic's error type.
WANTED: dict[str, str] = {
    "bool_type": "a boolean (true/false)",
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "tuple_type": "a tuple (a list in JSON)",
    "list_type": "a list",
    "dict_type": "a mapping",
}


def _keep_input(value: Any, handler: pydantic.ValidatorFunctionWrapHandler) -> Any:
    handler(value)  # checked strictly, the value kept as given (an int stays an int)
    return value


# Scalars strictly: a bool never for a number ("True" is an int in Python), a string never for a
# bool ("false" is truthy) or a number; an int is a float's value as given.
STRICT: dict[Any, Any] = {
    bool: pydantic.StrictBool,
    int: pydantic.StrictInt,
    float: Annotated[float, pydantic.Strict(), pydantic.WrapValidator(_keep_input)],
    str: pydantic.StrictStr,
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

    Checked by pydantic (scalars strict, nested configs only as instances); its first error
    becomes the one-line message. Call it first in a config dataclass's ``__post_init__``
    (before range checks, which would otherwise fail with a bare ``TypeError`` on ``"3" < 1``)."""
    cls: type = type(config)
    for name, hint in _hints(cls).items():
        value = getattr(config, name)
        where = f"{cls.__name__}.{name}"
        inner, optional = optional_inner(hint)
        if optional and value is None:
            continue
        fixed = checked_value(inner, value, where)
        if fixed != value or type(fixed) is not type(value):  # a list given for a tuple
            object.__setattr__(config, name, fixed)


def checked_value(hint: Any, value: Any, where: str) -> Any:
    """``value`` validated against ``hint`` (a list for a tuple comes back a tuple), else a
    ConfigError: ``<where>[<index>] must be <wanted>, got <value>``."""
    try:
        return _adapter(hint).validate_python(value)
    except pydantic.ValidationError as exc:
        raise ConfigError(_message(exc.errors()[0], hint, value, where)) from None


@functools.cache
def _adapter(hint: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(_strict(hint))


def _strict(hint: Any) -> Any:
    """``hint`` for pydantic: scalars strict, a dataclass only as an instance of itself (never
    built from a mapping), containers as declared; hints without a check (``Any``) as they are."""
    if hint in STRICT:
        return STRICT[hint]
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return pydantic.InstanceOf[hint]  # type: ignore[misc] # InstanceOf is generic at run time only
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (tuple, list, dict, types.UnionType, typing.Union) and args:
        strict_args = tuple(a if a is Ellipsis else _strict(a) for a in args)
        if origin is types.UnionType:
            return typing.Union[strict_args]  # noqa: UP007 (built from a tuple)
        return origin[strict_args]
    return hint


def _message(error: Any, hint: Any, value: Any, where: str) -> str:
    """pydantic's error as ``<where>[<index>] must be <wanted>, got <value>``."""
    loc = list(error["loc"])
    if error["type"] in ("too_long", "too_short", "missing"):  # a fixed-length tuple
        loc = loc[:-1] if error["type"] == "missing" else loc
        sub, path = _at(hint, loc), _path(loc)
        n = len(typing.get_args(sub))
        return f"{where}{path} must be a list of {n} values, got {describe(_value_at(value, loc))}"
    sub, path, got = _at(hint, loc), _path(loc), error["input"]
    sub = optional_inner(sub)[0]
    if got is None:
        return f"{where}{path} must not be null (it needs a value of type {_name(sub)})"
    if error["type"] == "is_instance_of":
        wanted = f"a {_name(sub)}"
    elif error["type"] == "literal_error":
        wanted = f"one of {list(typing.get_args(sub))}"
    else:
        wanted = WANTED.get(error["type"], f"of type {_name(sub)}")
    return f"{where}{path} must be {wanted}, got {describe(got)}"


def _at(hint: Any, loc: list[Any]) -> Any:
    """The part of ``hint`` that pydantic's error location ``loc`` points at."""
    for i, part in enumerate(loc):
        hint = optional_inner(hint)[0]
        args = typing.get_args(hint)
        if typing.get_origin(hint) is dict:
            hint = args[0] if i + 1 < len(loc) and loc[i + 1] == "[key]" else args[1]
        elif part == "[key]":
            continue
        elif typing.get_origin(hint) in (tuple, list):
            hint = args[0] if len(args) < 2 or args[1] is Ellipsis else args[part]
    return hint


def _path(loc: list[Any]) -> str:
    """``[1]``, ``['web']``, `` key 3``: an error location as the message writes it."""
    out = ""
    for i, part in enumerate(loc):
        if part == "[key]":
            continue
        if i + 1 < len(loc) and loc[i + 1] == "[key]":
            out += f" key {part!r}"
        else:
            out += f"[{part!r}]"
    return out


def _value_at(value: Any, loc: list[Any]) -> Any:
    for part in loc:
        if part != "[key]":
            value = value[part]
    return value


def _name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)
