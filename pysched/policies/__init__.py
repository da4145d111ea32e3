"""Scheduling policies for the sandbox: one module per policy behind one interface
(:class:`~pysched.policies.base.Policy`), listed in an explicit registry.

A policy takes parameters as ``name:key=value`` (:func:`get_policy`): each key is an argument
of its class's ``__init__`` (:func:`parameters` lists them with their defaults). A researcher's
own policies come from a Python file (``--policy-file``, :mod:`.files`) without editing the
package; a built-in one is a module here with an entry in :data:`REGISTRY` below.
"""
from __future__ import annotations

import inspect
from typing import Any

from .as_traced import AsTraced
from .base import Policy
from .cache_fair import CacheFair
from .disaggregate_os import DisAggregateOS
from .fairness import Fairness
from .files import PolicyFileError, load_policy_file, load_policy_files
from .flexsc import FlexSC
from .hrrs import HRRS
from .linux import Linux
from .profile_dvfs import ProfileDvfs
from .schedtask import SchedTask
from .selective_offload import SelectiveOffload
from .slicc import SLICC

#: name -> policy class. Order is the order of ``pysched evaluate --list``.
REGISTRY: dict[str, type[Policy]] = {cls.name: cls for cls in (
    AsTraced, Linux, SchedTask, SelectiveOffload, FlexSC, DisAggregateOS, SLICC, HRRS,
    Fairness, CacheFair, ProfileDvfs)}


def get_policy(name: str, **params) -> Policy:
    """A new instance of the registered policy ``name``.

    ``name`` may carry parameters as ``name:key=value:key=value`` (e.g.
    ``schedtask:stealing=none:heatmap_bits=128``); numbers are converted.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the registered ones) or a bad parameter.
    """
    if ":" in name:
        name, _, spec = name.partition(":")
        for item in spec.split(":"):
            key, eq, val = item.partition("=")
            key = key.strip()
            if not eq or not key:
                raise ValueError(f"policy {name!r}: parameter {item!r} is not key=value "
                                 "(name:key=value:key=value)")
            if key in params:
                raise ValueError(f"policy {name!r}: parameter {key!r} given twice")
            params[key] = _number(val.strip())
    cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown policy {name!r}; registered: {', '.join(REGISTRY)}")
    defaults = parameters(cls)
    for key, val in params.items():
        d = defaults.get(key)
        if isinstance(d, (int, float)) and not isinstance(d, bool) and isinstance(val, str):
            raise ValueError(f"policy {name!r}: {key}={val!r} is not a number (default {d!r})")
    try:
        return cls(**params)
    except TypeError as e:
        raise ValueError(f"policy {name!r}: {e}") from None
    except ValueError as e:
        given = ":".join(f"{k}={v}" for k, v in params.items())
        raise ValueError(f"policy {name!r} ({given}): {e}") from None


def _number(text: str):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parameters(cls: type[Policy]) -> dict[str, Any]:
    """The ``name:key=value`` parameters policy class ``cls`` takes: its ``__init__``'s
    arguments with their defaults (``inspect.Parameter.empty`` for one without)."""
    sig = inspect.signature(cls.__init__)
    return {n: p.default for n, p in list(sig.parameters.items())[1:]
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def describe() -> str:
    """Per registered policy: its name and summary, then its parameters with their defaults
    and, for one from a policy file, the file."""
    from .files import file_of
    width = max(len(n) for n in REGISTRY)
    lines = []
    for n, cls in REGISTRY.items():
        lines.append(f"{n:<{width}}  {cls.summary}")
        params = parameters(cls)
        if params:
            text = ", ".join(k if v is inspect.Parameter.empty else f"{k}={v}"
                             for k, v in params.items())
            lines.append(f"{'':<{width}}  parameters: {text}")
        if (origin := file_of(n)) is not None:
            lines.append(f"{'':<{width}}  from {origin}")
    return "\n".join(lines)


__all__ = ["Policy", "PolicyFileError", "REGISTRY", "describe", "get_policy",
           "load_policy_file", "load_policy_files", "parameters"]
