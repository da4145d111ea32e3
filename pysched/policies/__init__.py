"""Scheduling policies for the sandbox: one module per policy behind one interface
(:class:`~pysched.policies.base.Policy`), listed in an explicit registry.

To add a policy: write ``pysched/policies/<name>.py`` with a ``Policy`` subclass and add it to
:data:`REGISTRY` below.
"""
from __future__ import annotations

from .as_traced import AsTraced
from .base import Policy
from .linux import Linux

#: name -> policy class. Order is the order of ``pysched evaluate --list``.
REGISTRY: dict[str, type[Policy]] = {cls.name: cls for cls in (AsTraced, Linux)}


def get_policy(name: str, **params) -> Policy:
    """A new instance of the registered policy ``name``.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the registered ones.
    """
    cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown policy {name!r}; registered: {', '.join(REGISTRY)}")
    return cls(**params)


def describe() -> str:
    """One line per registered policy: name, summary."""
    width = max(len(n) for n in REGISTRY)
    return "\n".join(f"{n:<{width}}  {cls.summary}" for n, cls in REGISTRY.items())


__all__ = ["Policy", "REGISTRY", "describe", "get_policy"]
