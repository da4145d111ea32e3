"""Configurations as data: dataclasses built from dicts, TOML or JSON files.

Every model configuration in :mod:`pysched.models` is a frozen dataclass whose ``__post_init__``
validates it. :func:`from_dict` builds one from plain data (nested dataclasses, tuples of
dataclasses), rejecting unknown keys with a message that names them; :func:`load_config` reads a
``.toml`` or ``.json`` file and names the file in any error.
"""
from __future__ import annotations

import dataclasses
import json
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Self, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is impossible; the message names the parameter (and file)."""


def check_int(name: str, value: Any, minimum: int | None = None) -> None:
    """Reject a configuration field that is not an integer (``bool`` included) or is below
    ``minimum``.

    Raises
    ------
    ConfigError
        Naming ``name``: "must be an integer", "must be a non-negative integer" (minimum 0) or
        "must be a positive integer" (minimum 1).
    """
    if minimum is None:
        what = "an integer"
    elif minimum in (0, 1):
        what = ("a non-negative integer", "a positive integer")[minimum]
    else:
        what = f"an integer of at least {minimum}"
    if isinstance(value, bool) or not isinstance(value, int) \
            or (minimum is not None and value < minimum):
        raise ConfigError(f"{name} must be {what}, got {value!r}")


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _convert(tp: Any, value: Any, where: str) -> Any:
    tp, optional = _unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{where}: must not be empty")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table of {tp.__name__} fields, "
                              f"got {type(value).__name__}")
        return from_dict(tp, value, where)
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: dict[str, Any], where: str | None = None) -> T:
    """Build dataclass ``cls`` from plain data.

    Parameters
    ----------
    cls : type
        A dataclass; nested dataclass fields and ``tuple[Dataclass, ...]`` fields are built
        recursively. Missing keys take the field's default.
    data : dict
        Field values.
    where : str, optional
        Prefix for error messages (e.g. a file name and table path).

    Raises
    ------
    ConfigError
        On an unknown key, a value of the wrong type or a value the dataclass rejects; the
        message names the key path.
    """
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                          f"known: {', '.join(fields)}")
    kwargs = {k: _convert(hints[k], v, f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except TypeError as exc:  # a required field without default is missing
        raise ConfigError(f"{where}: {exc}") from None


def to_dict(obj: Any) -> dict[str, Any]:
    """The plain-data form of a configuration (inverse of :func:`from_dict`)."""
    return dataclasses.asdict(obj)


class Loadable:
    """Mixin of the configuration dataclasses: build from plain data or a TOML/JSON file."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Build from plain data (see :func:`from_dict`)."""
        return from_dict(cls, data)

    @classmethod
    def load(cls, path: str | Path, table: str | None = None) -> Self:
        """Read from a ``.toml`` or ``.json`` file (see :func:`load_config`)."""
        return load_config(cls, path, table)


def load_config(cls: type[T], path: str | Path, table: str | None = None) -> T:
    """Read dataclass ``cls`` from a ``.toml`` or ``.json`` file.

    Parameters
    ----------
    cls : type
        The configuration dataclass.
    path : str or Path
        The file; its suffix selects the format.
    table : str, optional
        Dotted path of a sub-table to read (e.g. ``"machine.hierarchy"``); default the whole
        file.

    Raises
    ------
    ConfigError
        When the file cannot be read or parsed, the table is missing, or a value is invalid;
        the message names the file and key.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        if p.suffix == ".toml":
            data = tomllib.loads(raw.decode())
        elif p.suffix == ".json":
            data = json.loads(raw)
        else:
            raise ConfigError(f"{p}: unknown configuration format {p.suffix!r} "
                              f"(use .toml or .json)")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot parse ({exc})") from None
    where = str(p)
    if table:
        for key in table.split("."):
            if not isinstance(data, dict) or key not in data:
                raise ConfigError(f"{p}: no table {table!r}")
            data = data[key]
            where += f":{key}"
    return from_dict(cls, data, where)
