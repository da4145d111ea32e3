"""What each instruction range of a trace touches: the access stream the sandbox replays.

For every vCPU of a trace, the cache models' access stream
(:func:`pysched.models.caches.streams.access_stream`: one fetch per fetch line, and the
``mem`` table's loads and stores when the trace has them), kept whole and sorted by
instruction counter, so that any range ``[start, stop)`` of a vCPU's instructions maps to a
slice of accesses with two binary searches.

The stream is built in windows of exec rows to bound memory. Approximation: the first
instruction of each window starts a fetch-line access even when it continues the previous
window's line (one extra fetch per :data:`WINDOW_ROWS` exec rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysched.models.caches.streams import access_stream

#: Exec rows expanded at a time while building.
WINDOW_ROWS = 1 << 20


@dataclass
class Footprint:
    """Per vCPU: ``icount`` (int64, sorted), ``addr`` (uint64 physical byte address) and
    ``kind`` (uint8: 0 fetch, 1 load, 2 store) of every access.

    Attributes
    ----------
    line : int
        Line size the fetches were cut with.
    data : bool
        Whether loads and stores are included.
    """

    line: int
    data: bool
    icount: dict[int, np.ndarray]
    addr: dict[int, np.ndarray]
    kind: dict[int, np.ndarray]

    def window(self, vcpu: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Addresses and kinds of the accesses of instructions ``[start, stop)`` of ``vcpu``."""
        ic = self.icount[vcpu]
        lo = int(np.searchsorted(ic, start, side="left"))
        hi = int(np.searchsorted(ic, stop, side="left"))
        return self.addr[vcpu][lo:hi], self.kind[vcpu][lo:hi]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes + b.nbytes + c.nbytes for a, b, c in
                   zip(self.icount.values(), self.addr.values(), self.kind.values()))


def build_footprint(trace, vcpus: list[int], line: int = 64, data: bool | None = None,
                    progress=None) -> Footprint:
    """The :class:`Footprint` of ``vcpus`` of ``trace``.

    Parameters
    ----------
    trace : Trace
    vcpus : list of int
    line : int
        Cache line size in bytes (the L1i's).
    data : bool, optional
        Include loads and stores (default: when the trace has a ``mem`` table).
    progress : callable, optional
        Called with the number of exec rows done after each window.
    """
    if data is None:
        data = bool(trace.parts("mem"))
    ics, addrs, kinds = {}, {}, {}
    for v in vcpus:
        rows = trace.num_rows("exec", v)
        parts_i, parts_a, parts_k = [], [], []
        for lo in range(0, rows, WINDOW_ROWS):
            s = access_stream(trace, v, lo, min(lo + WINDOW_ROWS, rows), line=line, data=data)
            parts_i.append(s.icount.astype(np.int64, copy=False))
            parts_a.append(s.addr)
            parts_k.append(s.kind)
            if progress is not None:
                progress(min(lo + WINDOW_ROWS, rows) - lo)
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt))
        ics[v] = cat(parts_i, np.int64)
        addrs[v] = cat(parts_a, np.uint64)
        kinds[v] = cat(parts_k, np.uint8)
    return Footprint(line, data, ics, addrs, kinds)
