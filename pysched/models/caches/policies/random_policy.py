"""Random replacement: a hit changes nothing; a fill takes an invalid way if the set has one,
else replaces a way drawn by a xorshift64 generator whose state lives with the cache (runs are
reproducible from the seed). Hooks: see :mod:`.lru`.

The draw picks a position in the set's fill order (the twins' and the earlier kernels' order),
so this policy keeps the ways of a set in that order instead of stamps: a fill into a set with
an invalid way inserts at the front, invalid ways stay last, removal closes the gap. Only those
fills and removals move ways, and a full set never has them; hits and draws move nothing.
"""
from __future__ import annotations

import numba
import numpy as np

from .fifo import on_hit  # noqa: F401  (a hit changes nothing, as in FIFO)


@numba.njit(cache=True, inline="always")
def next_random(rng: np.ndarray) -> np.uint64:
    """Advance the xorshift64 state ``rng[0]`` and return it."""
    x = rng[0]
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    rng[0] = x
    return x


@numba.njit(cache=True, inline="always")
def fill(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int, ways: int, line: int,
         make_dirty: int, now: int, rng: np.ndarray) -> tuple[int, int]:
    last = base + ways - 1
    if tags[last] < 0:
        # invalid ways sit at the end: insert at the front, dropping one of them
        for j in range(last, base, -1):
            tags[j] = tags[j - 1]
            dirty[j] = dirty[j - 1]
        tags[base] = line
        dirty[base] = make_dirty
        return -1, 0
    x = next_random(rng)
    # the same way as x % ways; a power of two needs no 64-bit division (with the single
    # cache's counting out of its loop, random replacement ran 1.17-1.31x faster in the single
    # cache and 1.09-1.22x in the hierarchy: fetch lines of apache and netserver-10b, 4 and 16
    # ways of 64 bytes, best of two processes each)
    w = np.uint64(ways)
    i = base + int(x & (w - np.uint64(1)) if ways & (ways - 1) == 0 else x % w)
    old, old_dirty = tags[i], int(dirty[i])
    tags[i] = line
    dirty[i] = make_dirty
    return old, old_dirty


@numba.njit(cache=True, inline="always")
def remove(tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int, ways: int,
           i: int) -> None:
    last = base + ways - 1
    for j in range(i, last):
        tags[j] = tags[j + 1]
        dirty[j] = dirty[j + 1]
    tags[last] = -1
    dirty[last] = 0
