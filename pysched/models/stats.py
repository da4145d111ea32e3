"""Statistic records that subtract: ``after - before`` is the delta of an epoch (ChampSim style).

A record is a frozen dataclass of counters (numpy arrays or numbers). The models keep
cumulative records; the epoch-by-epoch evaluation takes a copy at each epoch boundary and
subtracts. ``+`` adds records (e.g. over epochs or runs of one shape).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence, TypeVar

import numpy as np

from .codes import EVENT_NAMES, IFETCH, KIND_NAMES, LEVEL_NAMES, LOAD, NKINDS, NLEVELS, STORE

R = TypeVar("R", bound="Record")


class Record:
    """Fieldwise ``-``, ``+`` and copy for dataclass records of arrays and numbers."""

    def _combine(self: R, other: R, op) -> R:
        if type(other) is not type(self):
            raise TypeError(f"cannot combine {type(self).__name__} with "
                            f"{type(other).__name__}")
        vals = {}
        for f in dataclasses.fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray) and a.shape != b.shape:
                raise ValueError(f"{type(self).__name__}.{f.name}: shapes {a.shape} and "
                                 f"{b.shape} differ")
            vals[f.name] = op(a, b)
        return type(self)(**vals)

    def __sub__(self: R, other: R) -> R:
        return self._combine(other, lambda a, b: a - b)

    def __add__(self: R, other: R) -> R:
        return self._combine(other, lambda a, b: a + b)

    def copy(self: R) -> R:
        """A snapshot that later updates of the model do not change."""
        return type(self)(**{f.name: (v.copy() if isinstance(v, np.ndarray) else v)
                             for f in dataclasses.fields(self)
                             for v in [getattr(self, f.name)]})

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name))
                   for f in dataclasses.fields(self))


def _sel(a: np.ndarray, idx) -> np.ndarray:
    """Sum over the indices ``idx`` of axis 0 (None: all)."""
    if idx is None:
        return a.sum(axis=0)
    if isinstance(idx, (int, np.integer)):
        return a[idx]
    return a[list(idx)].sum(axis=0)


@dataclass(frozen=True, eq=False)
class CacheStats(Record):
    """Counters of a :class:`~pysched.models.caches.hierarchy.Hierarchy`.

    Attributes
    ----------
    served : numpy.ndarray of int64, shape (cores, classes, 3, 4)
        ``served[core, cls, kind, level]``: accesses of requester class ``cls`` and kind
        (0 instruction fetch, 1 load, 2 store) on ``core`` that level ``level`` served (0 L1,
        1 L2, 2 L3, 3 memory). Every demand count derives from it: an access served at level
        ``s`` missed every level above ``s``.
    events : numpy.ndarray of int64, shape (cores, 8)
        Write-backs, write-back misses, back-invalidations and coherence actions caused by each
        core's accesses (column names in :data:`pysched.models.codes.EVENT_NAMES`).
    """

    served: np.ndarray
    events: np.ndarray

    @classmethod
    def zeros(cls, cores: int, classes: int) -> CacheStats:
        return cls(np.zeros((cores, classes, NKINDS, NLEVELS), dtype=np.int64),
                   np.zeros((cores, len(EVENT_NAMES)), dtype=np.int64))

    def _hist(self, kinds: Sequence[int], core=None, cls=None) -> np.ndarray:
        """Per-level histogram (length 4) of the selected accesses."""
        a = _sel(self.served, core)          # (classes, kinds, levels)
        a = _sel(a, cls)                     # (kinds, levels)
        return a[list(kinds)].sum(axis=0)

    def accesses(self, level: int, kinds: Sequence[int], core=None, cls=None) -> int:
        """Demand accesses that reached ``level`` (0 L1, 1 L2, 2 L3, 3 memory).

        ``kinds`` selects instruction fetches (0), loads (1), stores (2); ``core`` and ``cls``
        select an index or a list of indices (None: all).
        """
        return int(self._hist(kinds, core, cls)[level:].sum())

    def hits(self, level: int, kinds: Sequence[int], core=None, cls=None) -> int:
        """Demand accesses that ``level`` served."""
        return int(self._hist(kinds, core, cls)[level])

    def misses(self, level: int, kinds: Sequence[int], core=None, cls=None) -> int:
        """Demand accesses that reached ``level`` and went further."""
        return int(self._hist(kinds, core, cls)[level + 1:].sum())

    def hit_rate(self, level: int, kinds: Sequence[int], core=None, cls=None) -> float:
        """hits / accesses at ``level`` (nan without accesses)."""
        n = self.accesses(level, kinds, core, cls)
        return self.hits(level, kinds, core, cls) / n if n else float("nan")

    def icache_hit_rate(self, core=None, cls=None) -> float:
        """L1i hit rate of instruction fetches (per fetch line)."""
        return self.hit_rate(0, (IFETCH,), core, cls)

    def dcache_hit_rate(self, core=None, cls=None) -> float:
        """L1d hit rate of loads and stores."""
        return self.hit_rate(0, (LOAD, STORE), core, cls)

    def event(self, name: str, core=None) -> int:
        """An event counter by name (see ``EVENT_NAMES``), summed over ``core`` (None: all)."""
        if name not in EVENT_NAMES:
            raise KeyError(f"unknown event {name!r}; known: {', '.join(EVENT_NAMES)}")
        return int(_sel(self.events, core)[EVENT_NAMES.index(name)])

    def group_classes(self, groups: Sequence[Sequence[int]]) -> CacheStats:
        """Stats with classes summed into groups (e.g. superFuncTypes into application/OS)."""
        served = np.stack([self.served[:, list(g)].sum(axis=1) for g in groups], axis=1)
        return CacheStats(served, self.events.copy())

    def table(self):
        """A tidy :class:`pandas.DataFrame`: one row per core, class, kind and serving level."""
        import pandas as pd
        cores, classes, kinds, levels = self.served.shape
        idx = pd.MultiIndex.from_product(
            [range(cores), range(classes), KIND_NAMES, LEVEL_NAMES],
            names=["core", "cls", "kind", "served"])
        return pd.DataFrame({"accesses": self.served.reshape(-1)}, index=idx).reset_index()


@dataclass(frozen=True, eq=False)
class SingleCacheStats(Record):
    """Counters of a single :class:`~pysched.models.caches.cache.Cache`.

    Attributes
    ----------
    counts : numpy.ndarray of int64, shape (classes, 2, 2)
        ``counts[cls, store, hit]``.
    writebacks : int
        Dirty lines evicted.
    """

    counts: np.ndarray
    writebacks: int

    @classmethod
    def zeros(cls, classes: int) -> SingleCacheStats:
        return cls(np.zeros((classes, 2, 2), dtype=np.int64), 0)

    def _pick(self, cls) -> np.ndarray:
        return _sel(self.counts, cls)

    def accesses(self, cls=None) -> int:
        return int(self._pick(cls).sum())

    def hits(self, cls=None) -> int:
        return int(self._pick(cls)[:, 1].sum())

    def misses(self, cls=None) -> int:
        return int(self._pick(cls)[:, 0].sum())

    def hit_rate(self, cls=None) -> float:
        n = self.accesses(cls)
        return self.hits(cls) / n if n else float("nan")


__all__ = ["CacheStats", "Record", "SingleCacheStats"]
