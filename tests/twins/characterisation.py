"""Twin of :func:`pysched.characterisation.kernels.epoch_counts`."""
from __future__ import annotations

import numpy as np


def twin_counts(start, stop, col, L, ne, nc) -> np.ndarray:
    """One instruction at a time."""
    out = np.zeros((ne, nc), dtype=np.int64)
    for a, b, c in zip(start, stop, col):
        for i in range(a, b):
            out[i // L, c] += 1
    return out
