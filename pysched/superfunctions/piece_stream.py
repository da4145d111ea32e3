"""Replaying the instructions of SuperFunction pieces, streamed from the exec parts.

A piece is a run of one instance on one vCPU (``Segmentation.pieces``); its instructions are
the vCPU's stream between counters ``start`` and ``stop``. :func:`piece_instructions` walks a vCPU's exec
stream once and hands out those instructions piece by piece, so a model can run exactly what
each instance retired, in order, without holding the whole stream.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from pysched.trace import Trace, block_index, exec_chunks
from pysched.trace.expand import expand_rows

from .segment import Segmentation


def piece_instructions(trace: Trace, seg: Segmentation, vcpu: int,
           pieces: pd.DataFrame | None = None) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Instructions of ``vcpu``'s pieces, in stream order.

    Parameters
    ----------
    trace : Trace
        The trace ``seg`` was made from.
    seg : Segmentation
    vcpu : int
    pieces : pandas.DataFrame, optional
        A subset of ``seg.pieces`` (any rows, ``start``/``stop`` may be narrowed); default: all
        pieces of ``vcpu``.

    Yields
    ------
    label, pc, paddr : int, numpy.ndarray of uint64, numpy.ndarray of uint64
        The piece's index label in ``pieces`` and a fragment of its instructions. A piece
        that spans exec parts comes as consecutive fragments (so memory stays bounded by a
        part); concatenated, they are exactly its instructions.
    """
    p = seg.pieces if pieces is None else pieces
    p = p[p["vcpu"] == vcpu].sort_values("start")
    if len(p) and (p["start"].to_numpy()[1:] < p["stop"].to_numpy()[:-1]).any():
        raise ValueError("pieces to replay overlap")
    labels = p.index.to_numpy()
    starts, stops = p["start"].to_numpy(np.int64), p["stop"].to_numpy(np.int64)
    idx = block_index(trace)
    k = 0
    for c in exec_chunks(trace, vcpu):
        if k >= len(starts):
            return
        ric = c.row_icount()
        end = c.start_icount + int(c.sizes.sum())
        while k < len(starts) and starts[k] < end:
            a, b = max(int(starts[k]), c.start_icount), min(int(stops[k]), end)
            if a < b:
                r0 = int(np.searchsorted(ric, a, side="right")) - 1
                r1 = int(np.searchsorted(ric, b, side="left"))
                pc, pa, _ = expand_rows(idx.start[c.pos[r0:r1]], c.sizes[r0:r1],
                                        idx.insn_vaddr, idx.insn_paddr)
                off = int(ric[r0])
                yield int(labels[k]), pc[a - off:b - off], pa[a - off:b - off]
            if stops[k] <= end:
                k += 1
            else:
                break
    if k < len(starts):
        raise ValueError(f"vCPU {vcpu}: pieces reach past the end of the exec stream "
                         f"(counter {int(stops[k])})")
