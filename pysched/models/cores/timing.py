"""Core timing from the cache model's counts.

``cycles = instructions * base_cpi + stall cycles``, where an access served by level ``s``
beyond the L1 stalls for ``latency(s) - latency(L1)`` cycles (the L1 hit latency is part of
the base CPI, which assumes L1 hits), instruction fetches in full and data accesses (loads and
stores) reduced by the core's ``data_miss_hidden`` share (0 for an in-order core).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..caches.config import HierarchyConfig
from ..codes import IFETCH, LOAD, STORE
from ..stats import CacheStats, Record
from .config import CoreConfig


def stall_table(hierarchy: HierarchyConfig, core: CoreConfig,
                ifetch_full: bool = False) -> np.ndarray:
    """Stall cycles per access by kind and serving level, shape (3, 4) of float64.

    Row ``kind`` (0 fetch, 1 load, 2 store), column ``level`` (0 L1 .. 3 memory).
    ``ifetch_full``: a fetch served beyond the L1 stalls for its level's full latency instead
    of the difference to the L1's (an upper bound: a sequential fetch overlaps part of it).
    """
    out = np.zeros((3, 4))
    for kind, l1 in ((IFETCH, hierarchy.l1i), (LOAD, hierarchy.l1d), (STORE, hierarchy.l1d)):
        lat = np.array([l1.latency, hierarchy.l2.latency, hierarchy.l3.latency,
                        hierarchy.memory_latency], dtype=np.float64)
        extra = lat.copy() if (kind == IFETCH and ifetch_full) else \
            np.maximum(lat - l1.latency, 0.0)
        extra[0] = 0.0
        if kind != IFETCH:
            extra *= 1.0 - core.data_miss_hidden
        out[kind] = extra
    return out


@dataclass(frozen=True, eq=False)
class CoreStats(Record):
    """Subtractable per-core timing record.

    Attributes
    ----------
    instructions : numpy.ndarray of int64, shape (cores,)
    base_cycles, stall_cycles, migration_cycles : numpy.ndarray of float64, shape (cores,)
    migrations : numpy.ndarray of int64, shape (cores,)
        Threads that arrived on each core from another core.
    """

    instructions: np.ndarray
    base_cycles: np.ndarray
    stall_cycles: np.ndarray
    migration_cycles: np.ndarray
    migrations: np.ndarray

    @classmethod
    def zeros(cls, cores: int) -> CoreStats:
        z = np.zeros(cores)
        return cls(np.zeros(cores, dtype=np.int64), z.copy(), z.copy(), z.copy(),
                   np.zeros(cores, dtype=np.int64))

    @property
    def cycles(self) -> np.ndarray:
        """Busy cycles per core."""
        return self.base_cycles + self.stall_cycles + self.migration_cycles


def cycles(instructions: int, served: np.ndarray, hierarchy: HierarchyConfig,
           core: CoreConfig, migrations: int = 0) -> float:
    """Busy cycles of a stretch of execution on one core.

    Parameters
    ----------
    instructions : int
        Instructions retired.
    served : array, shape (3, 4) or (..., 3, 4)
        Accesses by kind and serving level (e.g. ``stats.served[core].sum(axis=0)``); leading
        axes are summed.
    hierarchy : HierarchyConfig
        Latencies.
    core : CoreConfig
        Base CPI, hidden share, migration cost.
    migrations : int
        Times the thread arrived from another core during the stretch.

    Returns
    -------
    float
        ``instructions * base_cpi + sum(served * stall_table) + migrations * migration_cycles``.
    """
    if instructions < 0:
        raise ValueError(f"instructions must not be negative, got {instructions}")
    if migrations < 0:
        raise ValueError(f"migrations must not be negative, got {migrations}")
    served = np.asarray(served)
    if served.shape[-2:] != (3, 4):
        raise ValueError(f"served must end in shape (3, 4) (kind, level), got {served.shape}")
    s = served.reshape(-1, 3, 4).sum(axis=0)
    return (instructions * core.base_cpi + float((s * stall_table(hierarchy, core)).sum())
            + migrations * core.migration_cycles)


def core_stats(instructions: np.ndarray, stats: CacheStats, hierarchy: HierarchyConfig,
               cores: list[CoreConfig] | tuple[CoreConfig, ...],
               migrations: np.ndarray | None = None) -> CoreStats:
    """A :class:`CoreStats` record for every core from one cache-stats record (or delta).

    Parameters
    ----------
    instructions : array of int, shape (cores,)
        Instructions each core retired.
    stats : CacheStats
        Accesses each core made (the same stretch of time).
    hierarchy : HierarchyConfig
    cores : sequence of CoreConfig
        Core type of each core.
    migrations : array of int, shape (cores,), optional
        Arrivals of threads from other cores.
    """
    n = stats.served.shape[0]
    instructions = np.asarray(instructions, dtype=np.int64)
    if instructions.shape != (n,) or len(cores) != n:
        raise ValueError(f"instructions and cores need one entry per core ({n})")
    migrations = np.zeros(n, dtype=np.int64) if migrations is None else \
        np.asarray(migrations, dtype=np.int64)
    base = np.array([instructions[c] * cores[c].base_cpi for c in range(n)])
    stall = np.array([(stats.served[c].sum(axis=0) * stall_table(hierarchy, cores[c])).sum()
                      for c in range(n)])
    mig = np.array([migrations[c] * cores[c].migration_cycles for c in range(n)], dtype=float)
    return CoreStats(instructions, base, stall, mig, migrations)
