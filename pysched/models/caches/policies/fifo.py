"""First in, first out: the set is kept in fill order; a hit changes nothing, a fill inserts
at the front and evicts the way filled longest ago (the last). Hooks: see :mod:`.lru`."""
from __future__ import annotations

import numba
import numpy as np

from .lru import insert_front


@numba.njit(cache=True, inline="always")
def on_hit(tags: np.ndarray, dirty: np.ndarray, base: int, i: int) -> None:
    pass


@numba.njit(cache=True, inline="always")
def fill(tags: np.ndarray, dirty: np.ndarray, base: int, ways: int, line: int,
         make_dirty: int, rng: np.ndarray) -> tuple[int, int]:
    return insert_front(tags, dirty, base, ways, line, make_dirty)
