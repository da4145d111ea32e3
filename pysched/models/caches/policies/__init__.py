"""Replacement policies, one module each behind one hook signature (see :mod:`.lru`).

The kernels call :func:`on_hit`, :func:`fill` and :func:`remove` with the policy code of
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
def on_hit(policy: int, stamp: np.ndarray, i: int, now: int) -> None:
    if policy == LRU:
        lru.on_hit(stamp, i, now)
    elif policy == FIFO:
        fifo.on_hit(stamp, i, now)
    else:
        random_policy.on_hit(stamp, i, now)


@numba.njit(cache=True, inline="always")
def fill(policy: int, tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int,
         ways: int, line: int, make_dirty: int, now: int, rng: np.ndarray) -> tuple[int, int]:
    if policy == RANDOM:
        return random_policy.fill(tags, dirty, stamp, base, ways, line, make_dirty, now, rng)
    # LRU and FIFO differ only in on_hit
    return lru.fill(tags, dirty, stamp, base, ways, line, make_dirty, now, rng)


@numba.njit(cache=True, inline="always")
def remove(policy: int, tags: np.ndarray, dirty: np.ndarray, stamp: np.ndarray, base: int,
           ways: int, i: int) -> None:
    if policy == RANDOM:
        random_policy.remove(tags, dirty, stamp, base, ways, i)
    else:
        lru.remove(tags, dirty, stamp, base, ways, i)


__all__ = ["FIFO", "LRU", "RANDOM", "fifo", "fill", "lru", "on_hit", "random_policy", "remove",
           "rng_state"]
