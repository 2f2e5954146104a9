"""Dagster launch config generated from the library's config dataclasses.

Every setting is defined once: in a frozen dataclass of ``pretrain/`` (its name, type, default and
documentation). The Launchpad's config classes are derived from it, never copied::

    FilterRunConfig = config_class(FilterConfig, exclude=("quality_model_uri",))

    @asset
    def filtered_shards(config: FilterRunConfig, store: ArtifactStore):
        library_config = to_library(config, FilterConfig, quality_model_uri=store.uri(...))

A dataclass field becomes a Config field with the same name, default and type: tuples become
lists, nested dataclasses nested Config classes (also as ``dict`` values and tuple items).
Its description is the field's trailing comment in the dataclass source, else the sentence of
the dataclass docstring that names it as ````name````. ``optional=True`` makes every
field default to ``None`` (training overrides: ``None`` keeps the recipe's value), and
:func:`overrides` returns only what the operator set.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

import pydantic
from dagster import Config

from pretrain.errors import ConfigError
from pretrain.settings import field_docs

Excluded = tuple[str, ...]


def _config_type(hint: Any, optional: bool, where: str, exclude: Excluded = ()) -> Any:
    """The Dagster-config type for a dataclass field's type hint (``exclude``: nested fields)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a nested section
        return config_class(hint, optional=optional, exclude=exclude)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"{where}: only X | None unions map to Dagster config, got {hint}")
        return _config_type(inner[0], optional, where, exclude) | None
    # the three ignores below: list[...] / dict[...] subscripted with a type computed at run
    # time (the Config class being generated), which a static checker cannot see
    if origin is tuple:
        items = {a for a in args if a is not Ellipsis}
        if items == {int, float}:  # a fixed (int, float) pair, e.g. (n-gram size, fraction)
            items = {float}
        if len(items) != 1:
            raise TypeError(f"{where}: tuples must hold one item type, got {hint}")
        return list[_config_type(items.pop(), optional, where)]  # type: ignore[misc]
    if origin is dict:
        return dict[args[0], _config_type(args[1], optional, where)]  # type: ignore[misc,valid-type]
    if origin is list:
        return list[_config_type(args[0], optional, where)]  # type: ignore[misc]
    if hint in (str, int, float, bool):
        return hint
    raise TypeError(f"{where}: type {hint} has no Dagster config equivalent; exclude the field")


def _nested(exclude: Excluded, name: str) -> Excluded:
    """The excluded paths under field ``name`` (``"toxicity.classifier_uri"`` → ``"classifier_uri"``)."""
    return tuple(e.removeprefix(name + ".") for e in exclude if e.startswith(name + "."))


def _config_value(value: Any, optional: bool, exclude: Excluded = ()) -> Any:
    """A library default as a Config default (tuples → lists, dataclasses → Config)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # a plain dict: Dagster wants JSON-like defaults; validate_default makes it a Config
        return {
            f.name: _config_value(getattr(value, f.name), optional, _nested(exclude, f.name))
            for f in dataclasses.fields(value)
            if f.init and f.name not in exclude
        }
    if isinstance(value, tuple | list):
        return [_config_value(v, optional) for v in value]
    if isinstance(value, dict):
        return {k: _config_value(v, optional) for k, v in value.items()}
    return value


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


@cache
def config_class(
    cls: type, *, exclude: Excluded = (), optional: bool = False, name: str | None = None
) -> type[Config]:
    """A Dagster ``Config`` class mirroring the dataclass ``cls`` (see the module docstring);
    ``exclude`` names fields the asset provides itself (``"data.packed_dir"`` for a nested one)."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.name in exclude or not field.init:
            continue
        where = f"{cls.__name__}.{field.name}"
        nested = _nested(exclude, field.name)
        ftype = _config_type(hints[field.name], optional, where, nested)
        default = _default(field)
        description = docs.get(field.name)
        if optional:
            fields[field.name] = (ftype | None, pydantic.Field(None, description=description))
        elif default is dataclasses.MISSING:
            fields[field.name] = (ftype, pydantic.Field(description=description))
        else:
            value = _config_value(default, optional, nested)
            fields[field.name] = (
                ftype,
                pydantic.Field(value, description=description, validate_default=True),
            )
    suffix = "Overrides" if optional else "Config"
    model = pydantic.create_model(
        name or cls.__name__.removesuffix("Config") + suffix, __base__=Config, **fields
    )
    model.__doc__ = cls.__doc__
    model.__module__ = __name__
    return model


def _library_value(hint: Any, value: Any) -> Any:
    """A Config value (already type-checked by Dagster) as the library type ``hint`` wants it."""
    if value is None:
        return None
    if isinstance(value, Config):
        value = value.model_dump()
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a nested section
        return build(hint, value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return _library_value(inner[0], value)
    if origin is tuple:
        if Ellipsis not in args:  # fixed positions, e.g. tuple[int, float]
            return tuple(_library_value(a, v) for a, v in zip(args, value, strict=True))
        return tuple(_library_value(args[0], v) for v in value)
    if origin is dict:
        return {k: _library_value(args[1], v) for k, v in value.items()}
    if origin is list:
        return [_library_value(args[0], v) for v in value]
    if hint is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def build(cls: type, values: dict[str, Any], **given: Any) -> Any:
    """The library dataclass ``cls`` from config values (a dict or a Config's dump) plus
    ``given`` (fields the asset provides, e.g. URIs); ``None`` values of optional-mode dumps
    are dropped so the dataclass default stands."""
    hints = typing.get_type_hints(cls)
    kwargs = {k: _library_value(hints[k], v) for k, v in values.items() if k in hints}
    chosen = {**kwargs, **given}
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init
        and f.name not in chosen
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:  # a ConfigError that says what to set, not the constructor's TypeError
        them = "it" if len(missing) == 1 else "them"
        raise ConfigError(
            f"{cls.__name__} needs {', '.join(missing)}: set {them} in the run config"
        )
    return cls(**chosen)


def to_library(config: Config, cls: type, **given: Any) -> Any:
    """The library config for a launch: ``config`` (a :func:`config_class` instance) + ``given``."""
    return build(cls, config.model_dump(), **given)


def overrides(config: Config | dict[str, Any]) -> dict[str, Any]:
    """The fields an operator set in an ``optional=True`` config (nested), without the ``None``s."""
    values = config.model_dump() if isinstance(config, Config) else config
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and not any(isinstance(k, int) for k in value):
            nested = overrides(value)
            if nested:
                out[key] = nested
        elif value is not None:
            out[key] = value
    return out
