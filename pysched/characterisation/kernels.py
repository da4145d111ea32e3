"""Per-epoch instruction counts: pieces of the streams split at epoch boundaries."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _epoch_counts(start: np.ndarray, stop: np.ndarray, col: np.ndarray, bounds: np.ndarray,
                  nepochs: int, ncols: int) -> np.ndarray:
    """``out[e, c]``: instructions of pieces with column ``c`` whose counters fall in epoch
    ``e``; epoch ``e`` of the stream is ``[bounds[e - 1], bounds[e])`` (``bounds`` sorted,
    epoch 0 from 0, the last one open-ended). No checks: see :func:`epoch_counts`."""
    out = np.zeros((nepochs, ncols), dtype=np.int64)
    nb = bounds.shape[0]
    for i in range(start.shape[0]):
        a, b, c = start[i], stop[i], col[i]
        e = np.searchsorted(bounds, a, side="right")
        while a < b:
            end = bounds[e] if e < nb else b
            if end > b:
                end = b
            out[e, c] += end - a
            a = end
            e += 1
    return out


def epoch_counts(start: np.ndarray, stop: np.ndarray, col: np.ndarray,
                 bounds: int | np.ndarray, nepochs: int | None = None,
                 ncols: int | None = None) -> np.ndarray:
    """Instructions per epoch and column of a set of pieces of one vCPU's stream.

    Parameters
    ----------
    start, stop : array of int
        Instruction counters of each piece (``stop`` exclusive), on one vCPU's counter.
    col : array of int
        Column (category, type index, ...) of each piece, ``>= 0``.
    bounds : int or array of int
        Where the vCPU's epochs after the first begin (sorted icounts, as
        :meth:`pysched.trace.clock.TraceClock.epoch_bounds` gives them; instructions past the
        last bound are in the last epoch), or an epoch length: epochs
        ``[e * bounds, (e + 1) * bounds)``.
    nepochs, ncols : int, optional
        Output shape (default: just large enough).

    Returns
    -------
    numpy.ndarray of int64, shape ``(nepochs, ncols)``

    Raises
    ------
    ValueError
        On arrays of different lengths, a piece with ``stop < start`` or a negative start or
        column, unsorted or negative bounds, a length that is not positive, or an output shape
        too small for the pieces.
    """
    start = np.ascontiguousarray(start, dtype=np.int64)
    stop = np.ascontiguousarray(stop, dtype=np.int64)
    col = np.ascontiguousarray(col, dtype=np.int64)
    if not (start.shape == stop.shape == col.shape) or start.ndim != 1:
        raise ValueError("start, stop and col must be 1-D arrays of one length")
    if len(start) and (start.min() < 0 or (stop < start).any() or col.min() < 0):
        raise ValueError("pieces need 0 <= start <= stop and col >= 0")
    top = int(stop.max()) if len(stop) else 0
    if np.ndim(bounds) == 0:
        if int(bounds) <= 0:
            raise ValueError(f"epoch length must be positive, got {bounds}")
        bounds = np.arange(int(bounds), max(top, 1), int(bounds), dtype=np.int64)
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    if bounds.ndim != 1 or (len(bounds) and (bounds[0] < 0 or (np.diff(bounds) < 0).any())):
        raise ValueError("bounds must be a sorted 1-D array of icounts >= 0")
    need_e = int(np.searchsorted(bounds, top - 1, side="right")) + 1 if top > 0 else 0
    need_c = int(col.max()) + 1 if len(col) else 0
    nepochs = need_e if nepochs is None else int(nepochs)
    ncols = need_c if ncols is None else int(ncols)
    if nepochs < need_e or ncols < need_c:
        raise ValueError(f"output shape ({nepochs}, {ncols}) too small for the pieces "
                         f"({need_e}, {need_c})")
    return _epoch_counts(start, stop, col, bounds, nepochs, ncols)
