"""Per-epoch instruction breakup by superFuncType and its stability (seed 000, section 4.4).

An epoch's breakup is the vector of the fractions of its instructions that each superFuncType
executed (scheduler code left out); consecutive epochs are compared by cosine similarity.
Epochs are counted in machine-wide instructions (:mod:`pysched.trace.clock`): epoch ``k`` is
the whole machine's instructions ``[k * E, (k + 1) * E)`` in the trace's cross-vCPU order,
``E = epoch_len * nvcpus``; the default ``epoch_len``,
:data:`pysched.superfunctions.DEFAULT_EPOCH`, stands for the paper's 3 ms at 2 GHz and an IPC
of 1, so an epoch is 3 ms of the machine at full load, and an idle vCPU neither ends an epoch
nor holds one open.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pysched.superfunctions import Segmentation

from .kernels import epoch_counts


def segmentation_epoch_counts(seg: Segmentation, pieces: pd.DataFrame, col: np.ndarray,
                              ncols: int, epoch_len: int | None = None) -> np.ndarray:
    """Instructions per epoch and column of some of a segmentation's pieces.

    Parameters
    ----------
    seg : Segmentation
    pieces : pandas.DataFrame
        Rows of ``seg.pieces`` (any vCPUs).
    col : numpy.ndarray of int
        Column of each of those pieces, in ``[0, ncols)``.
    ncols : int
    epoch_len : int, optional
        Instructions per vCPU per epoch (default: the segmentation's).

    Returns
    -------
    numpy.ndarray of int64, shape ``(seg.nepochs, ncols)`` (epochs of ``epoch_len``)
    """
    L = seg.epoch_len if epoch_len is None else int(epoch_len)
    bounds = seg.epoch_bounds if L == seg.epoch_len else seg.clock.epoch_bounds(L)
    ne = len(next(iter(bounds.values()), ())) + 1 if seg.total_insns else 0
    out = np.zeros((ne, ncols), dtype=np.int64)
    vcpu = pieces["vcpu"].to_numpy()
    start, stop = pieces["start"].to_numpy(), pieces["stop"].to_numpy()
    col = np.asarray(col)
    for v, b in bounds.items():
        m = vcpu == v
        out += epoch_counts(start[m], stop[m], col[m], b, ne, ncols)
    return out


def epoch_breakup(seg: Segmentation, epoch_len: int | None = None, by: str = "type",
                  vcpus: list[int] | None = None, keep_harness: bool = False) -> pd.DataFrame:
    """Instructions per epoch per superFuncType (or per category).

    Parameters
    ----------
    seg : Segmentation
    epoch_len : int, optional
        Instructions per vCPU per epoch (default: the segmentation's).
    by : {"type", "category"}
    vcpus : list of int, optional
        Only these vCPUs' instructions (default: all); the epochs stay the machine's.
    keep_harness : bool
        Count the capture harness's own instructions too (:meth:`Segmentation.counted_pieces`).

    Returns
    -------
    pandas.DataFrame
        One row per epoch of the trace (index ``epoch``; the last ones may be beyond
        :attr:`Segmentation.complete_epochs`), one column per type (uint64) or category (int),
        instruction counts; scheduler code left out.
    """
    if by not in ("type", "category"):
        raise ValueError(f"by must be 'type' or 'category', got {by!r}")
    L = seg.epoch_len if epoch_len is None else int(epoch_len)
    p = seg.counted_pieces(keep_harness)
    p = p.loc[~p["sched"]]
    if vcpus is not None:
        p = p.loc[p["vcpu"].isin(vcpus)]
    key = seg.instances[by].to_numpy()[p["instance"].to_numpy()]
    labels, col = np.unique(key, return_inverse=True)
    counts = segmentation_epoch_counts(seg, p, col, len(labels), L)
    df = pd.DataFrame(counts, columns=pd.Index(labels, name=by))
    df.index.name = "epoch"
    return df


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Equation 1 of the paper; NaN when a vector is all zero."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na and nb else float("nan")


def consecutive_similarity(breakup: pd.DataFrame) -> pd.Series:
    """Cosine similarity of each epoch's breakup vector with the previous epoch's.

    Returns
    -------
    pandas.Series
        Indexed by the later epoch (1, 2, ...).
    """
    m = breakup.to_numpy(dtype=float)
    norms = np.linalg.norm(m, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = (m[1:] * m[:-1]).sum(axis=1) / (norms[1:] * norms[:-1])
    return pd.Series(sim, index=breakup.index[1:], name="similarity")


def steady_state(similarity: pd.Series, threshold: float = 0.995,
                 window: int = 5) -> int | None:
    """First epoch from which ``window`` consecutive similarities all exceed ``threshold``
    (None if never): where the paper's "stabilizes at > 0.995" begins."""
    above = (similarity > threshold).to_numpy()
    for i in range(len(above) - window + 1):
        if above[i:i + window].all():
            return int(similarity.index[i])
    return None
