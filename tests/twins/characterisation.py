"""Twin of :func:`pysched.characterisation.kernels.epoch_counts`."""
from __future__ import annotations

import numpy as np


def twin_counts(start, stop, col, bounds, ne, nc) -> np.ndarray:
    """One instruction at a time: its epoch is the number of bounds at or below it."""
    out = np.zeros((ne, nc), dtype=np.int64)
    for a, b, c in zip(start, stop, col):
        for i in range(a, b):
            out[sum(1 for x in bounds if x <= i), c] += 1
    return out
