"""Replacement policies, one module each behind one hook signature (see :mod:`.lru`).

The kernels call :func:`on_hit` and :func:`fill` with the policy code of
:data:`pysched.models.caches.config.POLICIES`; numba inlines the branch, which is predictable
because one cache always has one policy.
"""
from __future__ import annotations

import numba
import numpy as np

from . import fifo, lru, random_policy

LRU, FIFO, RANDOM = 0, 1, 2


@numba.njit(cache=True, inline="always")
def on_hit(policy: int, tags: np.ndarray, dirty: np.ndarray, base: int, i: int) -> None:
    if policy == LRU:
        lru.on_hit(tags, dirty, base, i)
    elif policy == FIFO:
        fifo.on_hit(tags, dirty, base, i)
    else:
        random_policy.on_hit(tags, dirty, base, i)


@numba.njit(cache=True, inline="always")
def fill(policy: int, tags: np.ndarray, dirty: np.ndarray, base: int, ways: int, line: int,
         make_dirty: int, rng: np.ndarray) -> tuple[int, int]:
    if policy == LRU:
        return lru.fill(tags, dirty, base, ways, line, make_dirty, rng)
    if policy == FIFO:
        return fifo.fill(tags, dirty, base, ways, line, make_dirty, rng)
    return random_policy.fill(tags, dirty, base, ways, line, make_dirty, rng)


__all__ = ["FIFO", "LRU", "RANDOM", "fifo", "fill", "lru", "on_hit", "random_policy"]
