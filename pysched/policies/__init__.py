"""Scheduling policies for the sandbox: one module per policy behind one interface
(:class:`~pysched.policies.base.Policy`), listed in an explicit registry.

To add a policy: write ``pysched/policies/<name>.py`` with a ``Policy`` subclass and add it to
:data:`REGISTRY` below.
"""
from __future__ import annotations

from .as_traced import AsTraced
from .base import Policy
from .cache_fair import CacheFair
from .disaggregate_os import DisAggregateOS
from .fairness import Fairness
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
        for item in filter(None, spec.split(":")):
            key, eq, val = item.partition("=")
            if not eq or not key:
                raise ValueError(f"policy {name!r}: parameter {item!r} is not key=value")
            params[key.strip()] = _number(val.strip())
    cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown policy {name!r}; registered: {', '.join(REGISTRY)}")
    try:
        return cls(**params)
    except TypeError as e:
        raise ValueError(f"policy {name!r}: {e}") from None


def _number(text: str):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def describe() -> str:
    """One line per registered policy: name, summary."""
    width = max(len(n) for n in REGISTRY)
    return "\n".join(f"{n:<{width}}  {cls.summary}" for n, cls in REGISTRY.items())


__all__ = ["Policy", "REGISTRY", "describe", "get_policy"]
