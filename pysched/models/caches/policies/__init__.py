"""Replacement policies, one module each behind one hook signature (see :mod:`.lru`).

The kernels call :func:`on_hit` and :func:`fill` with the policy code of
:data:`pysched.models.caches.config.POLICIES`; numba inlines the branch, which is predictable
because one cache always has one policy.
"""
from __future__ import annotations

import numba
import numpy as np

from . import fifo, lru, random_policy

#: Policy codes the kernels dispatch on (the one definition; config.POLICIES names them).
LRU, FIFO, RANDOM = 0, 1, 2


def rng_state(seed: int) -> int:
    """The random policy's xorshift state for ``seed`` (never 0, which xorshift cannot leave)."""
    return (int(seed) * 2654435761 + 0x9E3779B97F4A7C15) & (2**64 - 1) or 1


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


__all__ = ["FIFO", "LRU", "RANDOM", "fifo", "fill", "lru", "on_hit", "random_policy",
           "rng_state"]
