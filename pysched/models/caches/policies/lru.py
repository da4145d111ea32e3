"""Least recently used, and the per-way stamps that LRU and FIFO share.

Every policy implements hooks with one signature (numba, nopython; dispatched by
:mod:`pysched.models.caches.policies`):

``on_hit(stamp, i, now)``
    A demand access hit flat way index ``i``; ``now`` is the cache's clock, which grows by one
    per stamped event.
``fill(tags, dirty, stamp, base, ways, line, make_dirty, now, rng) -> (victim_line, victim_dirty)``
    Put ``line`` into the set starting at ``base``; return the line it replaced (-1: an invalid
    way) and its dirty bit. ``rng`` is a one-element uint64 xorshift state.
``remove(tags, dirty, stamp, base, ways, i)``
    Invalidate flat way ``i`` (coherence, back-invalidation).

LRU and FIFO leave the ways of a set where they are and keep a stamp per way: the clock value
of the way's last use (LRU: fill or demand hit) or of its fill (FIFO); an invalid way has stamp
-1. The victim is the way with the smallest stamp, so invalid ways go first. This is the same
order as keeping each set sorted by recency (pycachesim, the twins), at a cost that does not
grow with the hit's position: a hit writes one stamp instead of shifting the set, and the
smallest stamp of a set of up to 16 ways is one vector reduction
(:func:`pysched.models.caches.simd.oldest`).
"""
from __future__ import annotations

import numba
import numpy as np

from .. import simd

#: Stamp of an invalid way: below every clock value, so fills take invalid ways first.
INVALID = -1


@numba.njit(cache=True, inline="always")
def replace_oldest(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int, ways: int,
                   line: int, make_dirty: int, now: int) -> tuple[int, int]:
    """Fill ``line`` into the way with the smallest stamp, stamped ``now``."""
    v = simd.oldest(stamp, base, ways)
    old, old_dirty = tags[v], int(dirty[v])
    tags[v] = line
    dirty[v] = make_dirty
    stamp[v] = now
    return old, old_dirty


@numba.njit(cache=True, inline="always")
def remove(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int, ways: int,
                   i: int) -> None:
    tags[i] = -1
    dirty[i] = 0
    stamp[i] = INVALID


@numba.njit(cache=True, inline="always")
def on_hit(stamp: np.ndarray, i: int, now: int) -> None:
    stamp[i] = now


@numba.njit(cache=True, inline="always")
def fill(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int, ways: int, line: int,
         make_dirty: int, now: int, rng: np.ndarray) -> tuple[int, int]:
    return replace_oldest(tags, dirty, stamp, base, ways, line, make_dirty, now)

