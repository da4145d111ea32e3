"""Least recently used.

Every policy keeps each set's ways in an order (``tags[base:base + ways]``, with the dirty bits
in ``dirty`` moving along) and implements two hooks with one signature (numba, nopython):

``on_hit(tags, dirty, base, i)``
    A demand access hit flat way index ``i`` of the set starting at ``base``.
``fill(tags, dirty, base, ways, line, make_dirty, rng) -> (victim_line, victim_dirty)``
    Put ``line`` into the set; return the line it replaced (-1: an invalid way) and its dirty
    bit. ``rng`` is a one-element uint64 xorshift state.

Invalid ways (tag -1) are always at the end of a set: fills take them first, invalidation
(:func:`pysched.models.caches.kernels._invalidate`) compacts the set.

LRU keeps the set in recency order: a hit moves the way to the front, a fill inserts at the
front and evicts the last way. Most hits are at the front, which makes lookups cheap.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def move_to_front(tags: np.ndarray, dirty: np.ndarray, base: int, i: int) -> None:
    line, d = tags[i], dirty[i]
    for j in range(i, base, -1):
        tags[j] = tags[j - 1]
        dirty[j] = dirty[j - 1]
    tags[base] = line
    dirty[base] = d


@numba.njit(cache=True, inline="always")
def insert_front(tags: np.ndarray, dirty: np.ndarray, base: int, ways: int, line: int,
                 make_dirty: int) -> tuple[int, int]:
    last = base + ways - 1
    old, old_dirty = tags[last], int(dirty[last])
    for j in range(last, base, -1):
        tags[j] = tags[j - 1]
        dirty[j] = dirty[j - 1]
    tags[base] = line
    dirty[base] = make_dirty
    return old, old_dirty


@numba.njit(cache=True, inline="always")
def on_hit(tags: np.ndarray, dirty: np.ndarray, base: int, i: int) -> None:
    if i != base:
        move_to_front(tags, dirty, base, i)


@numba.njit(cache=True, inline="always")
def fill(tags: np.ndarray, dirty: np.ndarray, base: int, ways: int, line: int,
         make_dirty: int, rng: np.ndarray) -> tuple[int, int]:
    return insert_front(tags, dirty, base, ways, line, make_dirty)
