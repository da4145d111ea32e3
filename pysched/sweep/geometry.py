"""Cache geometries of a sweep: the i-cache size and a 2- or 3-level hierarchy on a base machine.

The SchedTask appendix (seed 000, Tables 2 and 3) varies the L1 i-cache over 4-way 16, 32 and
64 KB and compares two-level hierarchies (private L1s, a shared 8 MB L2) with the three-level
one of Table 2 (private L1s and 256 KB L2, a shared 8 MB L3). The models always build a private
L2 (:class:`~pysched.models.caches.hierarchy.Hierarchy`), so a two-level machine is made by
shrinking the private L2 to a single 64-byte line with the shared cache's latency: an L1 miss
is then served at the shared cache's latency, as in the paper's Config1. The only difference
from a true two-level hierarchy is that the rare hit in that one line (a line the L1 evicted
and that nothing replaced since) does not refresh the shared cache's LRU order.
"""
from __future__ import annotations

import dataclasses

from pysched.models.caches.config import CacheConfig, HierarchyConfig
from pysched.models.cores.config import big_core
from pysched.models.machine import MachineConfig

#: Cache levels a sweep may ask for.
LEVELS = (2, 3)


def hierarchy(l1i_kb: int, levels: int, base: HierarchyConfig | None = None) -> HierarchyConfig:
    """``base`` (default Table 2) with an ``l1i_kb`` KB i-cache and ``levels`` cache levels.

    Parameters
    ----------
    l1i_kb : int
        L1 i-cache capacity in KB; ways, line and latency stay those of ``base.l1i``.
    levels : int
        3: ``base`` as it is; 2: the private L2 shrunk to one line at the L3's latency (see the
        module docstring).
    base : HierarchyConfig, optional

    Raises
    ------
    ValueError
        For ``levels`` not in :data:`LEVELS`, or
        :class:`~pysched.models.configio.ConfigError` (a ``ValueError``) for an i-cache size
        that is no valid geometry with the base's ways and line.
    """
    base = HierarchyConfig() if base is None else base
    if levels not in LEVELS:
        raise ValueError(f"levels must be 2 or 3, got {levels!r}")
    l1i = dataclasses.replace(base.l1i, size=int(l1i_kb) * 1024)
    h = dataclasses.replace(base, l1i=l1i)
    if levels == 2:
        h = dataclasses.replace(h, l2=CacheConfig(size=base.line, ways=1, line=base.line,
                                                 latency=base.l3.latency))
    return h


def base_machine(l1i_kb: int, levels: int, base: MachineConfig | None = None) -> MachineConfig:
    """A one-core machine whose hierarchy is :func:`hierarchy`; the runner repeats its first
    core type at every core count (:func:`pysched.evaluation.runner.machine`)."""
    core = big_core() if base is None else base.cores[0]
    h = hierarchy(l1i_kb, levels, None if base is None else base.hierarchy)
    return MachineConfig(dataclasses.replace(h, cores=1), (core,))


__all__ = ["LEVELS", "base_machine", "hierarchy"]
