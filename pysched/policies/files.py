"""Policies from a researcher's own Python file (``--policy-file FILE``).

A policy file is a Python module that defines one or more :class:`~.base.Policy` subclasses,
each with its own :attr:`~.base.Policy.name`; :func:`load_policy_file` runs it and adds those
classes to :data:`pysched.policies.REGISTRY`, where ``--policies NAME:key=value`` finds them as
it finds the built-in ones. Classes the file imports (``from pysched.policies.linux import
Linux``) and classes without a ``name`` (helpers meant to be subclassed) are not registered.

The loaded files' sources are kept (:func:`loaded_sources`) so that Dask workers, which do not
share this process's registry, load the same text (:mod:`pysched.sweep.worker_policies`), and
so that a sweep point's key changes when its policy's file changes
(:func:`source_digest`).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from pysched._argtypes import path as path_arg

from .base import Policy

#: Characters a policy name may not hold: they separate policies and parameters in
#: ``--policies a,b:key=value``.
_RESERVED = frozenset(",:= \t\n")


class PolicyFileError(ValueError):
    """A policy file cannot be used; the message names the file and says why."""


@dataclass(frozen=True)
class PolicySource:
    """A loaded policy file: where it was read, its text, and the policies it registered."""

    path: str
    text: str
    digest: str
    names: tuple[str, ...]


#: digest -> the loaded file, in load order.
_LOADED: dict[str, PolicySource] = {}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load_policy_file(path: str | Path) -> list[str]:
    """Run the Python file ``path`` and register the policies it defines.

    Parameters
    ----------
    path : str or Path
        A Python file defining :class:`~pysched.policies.Policy` subclasses.

    Returns
    -------
    list of str
        The names registered (or already registered from the same text).

    Raises
    ------
    PolicyFileError
        When the file cannot be read or run, defines no policy with a name, or defines a
        name that a registered policy (built in or from another file) already has.
    """
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"{path}: cannot be read ({exc})") from None
    return load_policy_source(str(path), text)


def load_policy_source(path: str, text: str) -> list[str]:
    """:func:`load_policy_file` from the file's text (``path`` names it in messages)."""
    from . import REGISTRY
    digest = _digest(text)
    if digest in _LOADED:  # the same text again (a worker's plugin set up twice, ...)
        return list(_LOADED[digest].names)
    modname = f"pysched_policy_file_{digest[:16]}"
    spec = importlib.util.spec_from_loader(modname, loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    # in sys.modules while it runs: dataclasses and pickling look a class's module up there
    sys.modules[modname] = module
    try:
        try:
            exec(compile(text, path, "exec"), module.__dict__)
        except Exception as exc:
            where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) and exc.lineno else ""
            raise PolicyFileError(f"{path}: {where}running it failed: "
                                  f"{type(exc).__name__}: {exc}") from None
        names = _policies_of(module, path, REGISTRY)
    except PolicyFileError:
        del sys.modules[modname]
        raise
    REGISTRY.update(names)
    _LOADED[digest] = PolicySource(path, text, digest, tuple(names))
    return list(names)


def _policies_of(module, path: str, registry: dict[str, type[Policy]]
                 ) -> dict[str, type[Policy]]:
    """name -> class of the named policies ``module`` defines; PolicyFileError when there is
    none or a name cannot be registered."""
    classes = [obj for obj in vars(module).values()
               if isinstance(obj, type) and issubclass(obj, Policy)
               and obj.__module__ == module.__name__ and obj.name]
    if not classes:
        raise PolicyFileError(f"{path}: defines no policy: a class deriving from "
                              "pysched.policies.Policy with a `name`")
    names: dict[str, type[Policy]] = {}
    for cls in classes:
        name = cls.name
        if not isinstance(name, str) or any(c in _RESERVED for c in name):
            problem = (f"name {name!r} is not a policy name (no spaces, commas, colons or "
                       "equals signs)")
        elif name in names:
            problem = f"name {name!r} is also the name of class {names[name].__qualname__}"
        elif name in registry:
            origin = file_of(name)
            problem = (f"name {name!r} is already a registered policy "
                       f"({f'from {origin}' if origin else 'built in'}); give the class a "
                       "name of its own")
        else:
            names[name] = cls
            continue
        raise PolicyFileError(f"{path}: class {cls.__qualname__}: {problem}")
    return names


def load_policy_files(paths: list[str | Path] | None) -> list[str]:
    """:func:`load_policy_file` on each of ``paths`` in order (the ``--policy-file``
    arguments); returns every name registered. Errors start with ``--policy-file``."""
    names: list[str] = []
    for p in paths or ():
        try:
            names += load_policy_file(p)
        except PolicyFileError as exc:
            raise PolicyFileError(f"--policy-file {exc}") from None
    return names


def loaded_sources() -> list[tuple[str, str]]:
    """``(path, text)`` of every policy file loaded in this process, in load order."""
    return [(s.path, s.text) for s in _LOADED.values()]


def file_of(name: str) -> str | None:
    """The file policy ``name`` was loaded from (None: built in or unknown)."""
    return next((s.path for s in _LOADED.values() if name in s.names), None)


def source_digest(name: str) -> str | None:
    """SHA-256 of the text of the file policy ``name`` came from (None: not from a file)."""
    return next((s.digest for s in _LOADED.values() if name in s.names), None)


def add_argument(p: argparse.ArgumentParser) -> None:
    """The ``--policy-file FILE`` option (repeatable) of the commands that run policies."""
    p.add_argument("--policy-file", type=path_arg, action="append", default=[], metavar="FILE",
                   help="a Python file defining Policy subclasses (see examples/); each is "
                        "registered under its `name`, for --policies and the rest; "
                        "repeatable")


__all__ = ["PolicyFileError", "PolicySource", "add_argument", "file_of", "load_policy_file",
           "load_policy_files", "load_policy_source", "loaded_sources", "source_digest"]
