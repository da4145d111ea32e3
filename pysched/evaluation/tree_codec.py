"""A tree of plain values, numpy arrays and known dataclasses as JSON plus named arrays.

:func:`encode` turns a value into a JSON-able tree in which every numpy array is replaced by
a reference to its name in a separate dict of arrays; :func:`decode` rebuilds the value. The
prepared-trace cache (:mod:`pysched.evaluation.prepared_cache`) writes the tree as JSON and
each array as a ``.npy`` file, so that nothing is pickled: decoding builds only the
dataclasses it is given, never code named by the file.

Supported: ``None``, ``bool``, ``int``, ``float`` (NaN and infinities too), ``str``, numpy
scalars (their dtype kept), numpy arrays of a non-object dtype, lists, tuples, dicts (any
supported keys, e.g. int) and instances of the given dataclasses whose attributes are all
fields (an extra attribute set on an instance would be lost, so it is refused).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

import numpy as np

_ARRAY, _SCALAR, _TUPLE, _DICT, _CLASS = "__array__", "__scalar__", "__tuple__", "__dict__", \
    "__dataclass__"


def encode(value: Any, classes: Sequence[type], arrays: dict[str, np.ndarray],
           where: str = "") -> Any:
    """The JSON-able tree of ``value``; its arrays are added to ``arrays`` under unique names.

    Parameters
    ----------
    value : object
        What to encode (see the module docstring for the supported types).
    classes : sequence of type
        Dataclasses that may appear in ``value``.
    arrays : dict of str to numpy.ndarray
        Receives every array, under a name made from its place in the tree (``where``).
    where : str
        The place of ``value`` in the tree (dotted), for names and messages.

    Returns
    -------
    object
        A tree of JSON values.

    Raises
    ------
    TypeError
        On a value of an unsupported type, an object array, or a dataclass instance with an
        attribute that is not a field; the message names its place.
    """
    if value is None or isinstance(value, (bool, int, float, str)) \
            and not isinstance(value, np.generic):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"{where or 'value'}: an array of Python objects cannot be stored")
        name = _unique(re.sub(r"[^A-Za-z0-9_.-]", "_", where) or "array", arrays)
        arrays[name] = value
        return {_ARRAY: name}
    if isinstance(value, np.generic):
        return {_SCALAR: value.dtype.str, "value": value.item()}
    if isinstance(value, list):
        return [encode(v, classes, arrays, _at(where, i)) for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {_TUPLE: [encode(v, classes, arrays, _at(where, i)) for i, v in enumerate(value)]}
    if isinstance(value, dict):
        return {_DICT: [[encode(k, classes, arrays, _at(where, "key")),
                         encode(v, classes, arrays, _at(where, k))] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and type(value) in classes:
        fields = [f.name for f in dataclasses.fields(value)]
        extra = sorted(set(vars(value)) - set(fields)) if hasattr(value, "__dict__") else []
        if extra:
            raise TypeError(f"{where or 'value'}: {type(value).__name__} has attributes that "
                            f"are not fields ({', '.join(extra)}); they would be lost")
        return {_CLASS: type(value).__name__,
                "fields": {n: encode(getattr(value, n), classes, arrays, _at(where, n))
                           for n in fields}}
    raise TypeError(f"{where or 'value'}: cannot store a {type(value).__name__}")


def decode(tree: Any, classes: Sequence[type], arrays: dict[str, np.ndarray]) -> Any:
    """The value :func:`encode` made ``tree`` of.

    Parameters
    ----------
    tree : object
        From :func:`encode` (through JSON).
    classes : sequence of type
        The dataclasses the tree may name (by class name); no other class is built.
    arrays : dict of str to numpy.ndarray
        The arrays by name.

    Raises
    ------
    ValueError
        When the tree names an array that is not given, or a class not in ``classes``.
    """
    if isinstance(tree, list):
        return [decode(v, classes, arrays) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if _ARRAY in tree:
        if tree[_ARRAY] not in arrays:
            raise ValueError(f"array {tree[_ARRAY]!r} is missing")
        return arrays[tree[_ARRAY]]
    if _SCALAR in tree:
        return np.dtype(tree[_SCALAR]).type(tree["value"])
    if _TUPLE in tree:
        return tuple(decode(v, classes, arrays) for v in tree[_TUPLE])
    if _DICT in tree:
        return {_hashable(decode(k, classes, arrays)): decode(v, classes, arrays)
                for k, v in tree[_DICT]}
    if _CLASS in tree:
        by_name = {c.__name__: c for c in classes}
        cls = by_name.get(tree[_CLASS])
        if cls is None:
            raise ValueError(f"class {tree[_CLASS]!r} is not one this cache builds")
        values = {n: decode(v, classes, arrays) for n, v in tree["fields"].items()}
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        obj = cls(**{n: v for n, v in values.items() if n in init})
        for n, v in values.items():
            if n not in init:
                object.__setattr__(obj, n, v)
        return obj
    raise ValueError(f"unknown node {sorted(tree)!r}")


def _at(where: str, name: Any) -> str:
    return f"{where}.{name}" if where else str(name)


def _unique(name: str, taken: dict[str, Any]) -> str:
    out, i = name, 1
    while out in taken:
        out, i = f"{name}~{i}", i + 1
    return out


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


__all__ = ["decode", "encode"]
