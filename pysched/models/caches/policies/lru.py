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


@numba.njit(cache=True, inline="always")
def access4(tags: np.ndarray, dirty: np.ndarray, base: int, line: int,
            make_dirty: int) -> tuple[int, int, int, int]:
    """A demand access to a 4-way set whose front way does not hold ``line``.

    Equivalent to a lookup followed by :func:`on_hit` or :func:`fill`, without a branch on the
    data: the kernels test the front way first (most hits), and what is left is too
    unpredictable for branches (hits in ways 1-3 and misses mixed; each mispredicted branch
    costs more than computing every case). Returns ``(hit, old_dirty, victim_line,
    victim_dirty)``, with ``old_dirty`` the hit line's dirty bit before this access and
    ``victim_line`` -1 on a hit or when an invalid way was filled.
    """
    t0, t1, t2, t3 = tags[base], tags[base + 1], tags[base + 2], tags[base + 3]
    d0, d1, d2, d3 = dirty[base], dirty[base + 1], dirty[base + 2], dirty[base + 3]
    e1 = t1 == line
    e2 = t2 == line
    e3 = t3 == line
    # way k takes way k-1's line when the accessed line was at k or later (or missed)
    from2 = not e1
    from3 = from2 and not e2
    miss = from3 and not e3
    hit_dirty = d1 if e1 else (d2 if e2 else (d3 if e3 else np.uint8(0)))
    tags[base + 3] = t2 if from3 else t3
    dirty[base + 3] = d2 if from3 else d3
    tags[base + 2] = t1 if from2 else t2
    dirty[base + 2] = d1 if from2 else d2
    tags[base + 1] = t0
    dirty[base + 1] = d0
    tags[base] = line
    dirty[base] = hit_dirty | make_dirty
    return (0 if miss else 1), int(hit_dirty), (t3 if miss else -1), (int(d3) if miss else 0)
