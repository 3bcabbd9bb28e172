"""YAML -> frozen dataclasses, validated at load time.

Keys equal field names.  An unknown key is an error naming the file, the key
path and the closest valid key; bounds declared in field metadata are checked
(``field(metadata={"ge": 0.0})``) and a dataclass may add its own checks in a
``validate()`` method that raises :class:`ConfigError`.

Part of the base shared by ``zmp_walker`` and ``whole_body_control`` (also
importable as ``whole_body_control.yaml_config``); it imports nothing heavier
than PyYAML.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union

import yaml

from zmp_walker.base.errors import ConfigError

T = TypeVar("T")

_BOUNDS = {
    "gt": (lambda v, b: v > b, "> {}"),
    "ge": (lambda v, b: v >= b, ">= {}"),
    "lt": (lambda v, b: v < b, "< {}"),
    "le": (lambda v, b: v <= b, "<= {}"),
}


def read_yaml(path: str | Path) -> dict:
    """Read a YAML mapping from ``path``; an empty file is an empty mapping."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def closest_key(key: str, valid: typing.Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest valid key, or ``""``."""
    match = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.5)
    if match:
        return f" (did you mean '{match[0]}'?)"
    return f" (valid keys: {', '.join(sorted(valid))})"


def unknown_key_error(source: str, path: str, key: str, valid: typing.Iterable[str]) -> ConfigError:
    where = f"{path}.{key}" if path else str(key)
    return ConfigError(f"{source}: unknown key '{where}'{closest_key(key, valid)}")


def from_dict(cls: type[T], data: Any, source: str = "<dict>", path: str = "") -> T:
    """Build dataclass ``cls`` from a mapping, recursively, with validation.

    Args:
        cls: a dataclass type whose field names are the valid keys.
        data: the mapping read from YAML.
        source: file name for error messages.
        path: dotted key path of ``data`` inside the file.
    """
    return _convert(cls, data, source, path)


def load(cls: type[T], path: str | Path, section: str | None = None) -> T:
    """Load dataclass ``cls`` from the YAML file ``path``.

    Args:
        section: optional top-level key to read (for example ``ros__parameters``
            files nest everything under a node name).
    """
    data = read_yaml(path)
    if section is not None:
        if section not in data:
            raise ConfigError(f"{path}: missing top-level key '{section}'{closest_key(section, data)}")
        data = data[section]
    return from_dict(cls, data, str(path), section or "")


def to_dict(obj: Any) -> Any:
    """Inverse of :func:`from_dict`: plain Python containers for YAML/JSON."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, source: str, path: str) -> Any:
    where = path or "<top>"
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: '{where}' must be a mapping, got {value!r}")
        hints = typing.get_type_hints(tp)
        fields = {f.name: f for f in dataclasses.fields(tp) if f.init}
        for key in value:
            if key not in fields:
                raise unknown_key_error(source, path, key, fields)
        kwargs = {}
        for name, f in fields.items():
            sub = f"{path}.{name}" if path else name
            if name in value:
                kwargs[name] = _convert(hints[name], value[name], source, sub)
                _check_bounds(f, kwargs[name], source, sub)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{source}: missing required key '{sub}'")
        try:
            obj = tp(**kwargs)
        except ConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: '{where}': {exc}") from exc
        validate = getattr(obj, "validate", None)
        if validate is not None:
            try:
                validate()
            except ConfigError as exc:
                raise ConfigError(f"{source}: '{where}': {exc}") from exc
        return obj
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, source, path)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{source}: '{where}': {value!r} fits none of {tp}")
    if origin is dict:
        key_tp, val_tp = typing.get_args(tp)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: '{where}' must be a mapping, got {value!r}")
        return {
            _convert(key_tp, k, source, path): _convert(val_tp, v, source, f"{path}.{k}" if path else str(k))
            for k, v in value.items()
        }
    if origin in (tuple, list):
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{source}: '{where}' must be a list, got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{source}: '{where}' must have {len(args)} elements, got {len(value)}")
            items = [_convert(a, v, source, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value))]
        else:
            item_tp = args[0] if args else Any
            items = [_convert(item_tp, v, source, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{source}: '{where}' must be one of {list(choices)}, got {value!r}")
        return value
    if tp is Any:
        return value
    if tp is float:
        if isinstance(value, str):  # PyYAML (YAML 1.1) reads "1e-6" as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: '{where}' must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{source}: '{where}' must be finite, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: '{where}' must be an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: '{where}' must be true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{source}: '{where}' must be a string, got {value!r}")
        return value
    raise ConfigError(f"{source}: '{where}': unsupported field type {_type_name(tp)}")


def _check_bounds(f: dataclasses.Field, value: Any, source: str, path: str) -> None:
    values = value if isinstance(value, (tuple, list)) else (value.values() if isinstance(value, dict) else (value,))
    for key, (ok, text) in _BOUNDS.items():
        if key not in f.metadata:
            continue
        bound = f.metadata[key]
        for v in values:
            if isinstance(v, (int, float)) and not ok(v, bound):
                raise ConfigError(f"{source}: '{path}' must be {text.format(bound)}, got {v!r}")
