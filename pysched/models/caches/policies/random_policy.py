"""Random replacement: a hit changes nothing; a fill takes an invalid way if the set has one,
else replaces a way drawn by a xorshift64 generator whose state lives with the cache (runs are
reproducible from the seed). Hooks: see :mod:`.lru`."""
from __future__ import annotations

import numba
import numpy as np

from .fifo import on_hit  # noqa: F401  (a hit changes nothing, as in FIFO)
from .lru import insert_front


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
def fill(tags: np.ndarray, dirty: np.ndarray, base: int, ways: int, line: int,
         make_dirty: int, rng: np.ndarray) -> tuple[int, int]:
    if tags[base + ways - 1] < 0:
        # invalid ways sit at the end: inserting at the front drops one of them
        return insert_front(tags, dirty, base, ways, line, make_dirty)
    i = base + int(next_random(rng) % np.uint64(ways))
    old, old_dirty = tags[i], int(dirty[i])
    tags[i] = line
    dirty[i] = make_dirty
    return old, old_dirty
