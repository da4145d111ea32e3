"""First in, first out: a way's stamp is the clock at its fill; a hit changes nothing, a fill
replaces the way filled longest ago (an invalid way first). Hooks and stamps: see :mod:`.lru`."""
from __future__ import annotations

import numba
import numpy as np

from .lru import fill, remove  # noqa: F401  (fill order is LRU's order without the hits)


@numba.njit(cache=True, inline="always")
def on_hit(stamp: np.ndarray, i: int, now: int) -> None:
    pass
