"""Per-epoch instruction counts: pieces of the streams split at epoch boundaries."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _epoch_counts(start: np.ndarray, stop: np.ndarray, col: np.ndarray, epoch_len: int,
                  nepochs: int, ncols: int) -> np.ndarray:
    """``out[e, c]``: instructions of pieces with column ``c`` whose counters fall in epoch
    ``e`` (``[e * epoch_len, (e + 1) * epoch_len)``). No checks: see :func:`epoch_counts`."""
    out = np.zeros((nepochs, ncols), dtype=np.int64)
    for i in range(start.shape[0]):
        a, b, c = start[i], stop[i], col[i]
        e = a // epoch_len
        while a < b:
            end = (e + 1) * epoch_len
            if end > b:
                end = b
            out[e, c] += end - a
            a = end
            e += 1
    return out


def epoch_counts(start: np.ndarray, stop: np.ndarray, col: np.ndarray, epoch_len: int,
                 nepochs: int | None = None, ncols: int | None = None) -> np.ndarray:
    """Instructions per epoch and column of a set of pieces.

    Parameters
    ----------
    start, stop : array of int
        Instruction counters of each piece (``stop`` exclusive), on one vCPU's counter.
    col : array of int
        Column (category, type index, ...) of each piece, ``>= 0``.
    epoch_len : int
        Instructions per epoch.
    nepochs, ncols : int, optional
        Output shape (default: just large enough).

    Returns
    -------
    numpy.ndarray of int64, shape ``(nepochs, ncols)``

    Raises
    ------
    ValueError
        On arrays of different lengths, a piece with ``stop < start`` or a negative start or
        column, or an output shape too small for the pieces.
    """
    start = np.ascontiguousarray(start, dtype=np.int64)
    stop = np.ascontiguousarray(stop, dtype=np.int64)
    col = np.ascontiguousarray(col, dtype=np.int64)
    if not (start.shape == stop.shape == col.shape) or start.ndim != 1:
        raise ValueError("start, stop and col must be 1-D arrays of one length")
    if int(epoch_len) <= 0:
        raise ValueError(f"epoch_len must be positive, got {epoch_len}")
    if len(start) and (start.min() < 0 or (stop < start).any() or col.min() < 0):
        raise ValueError("pieces need 0 <= start <= stop and col >= 0")
    need_e = int((stop.max() - 1) // epoch_len + 1) if len(stop) and stop.max() > 0 else 0
    need_c = int(col.max()) + 1 if len(col) else 0
    nepochs = need_e if nepochs is None else int(nepochs)
    ncols = need_c if ncols is None else int(ncols)
    if nepochs < need_e or ncols < need_c:
        raise ValueError(f"output shape ({nepochs}, {ncols}) too small for the pieces "
                         f"({need_e}, {need_c})")
    return _epoch_counts(start, stop, col, int(epoch_len), nepochs, ncols)
