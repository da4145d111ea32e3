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
_U32_END = (1 << 32) - 1


@dataclass
class Footprint:
    """Per vCPU: ``icount`` (sorted) and ``lines`` (physical line number, address >> log2
    ``line``) of every access, and ``kind`` (0 fetch, 1 load, 2 store) when ``data``.

    Counters and line numbers are kept in 32 bits (a vCPU below 2**32 instructions, physical
    memory below 2**32 lines: 256 GiB at 64-byte lines; :func:`build_footprint` checks both),
    8 bytes an access (9 with data), so the largest shipped trace fits in under 1 GB.

    Attributes
    ----------
    line : int
        Line size the accesses were cut with (the machine's L1i line).
    data : bool
        Whether loads and stores are included.
    private : dict of int to numpy.ndarray of bool, optional
        See the field.
    """

    line: int
    data: bool
    icount: dict[int, np.ndarray]
    lines: dict[int, np.ndarray]
    kind: dict[int, np.ndarray | None]
    #: Per vCPU, whether each access is a copy's own (True) or shared by the copies of the
    #: workload (:func:`pysched.sandbox.kernel_data.copy_private`); None: every data access
    #: is each copy's own.
    private: dict[int, np.ndarray] | None = None

    @property
    def shift(self) -> int:
        return int(self.line).bit_length() - 1

    def window(self, vcpu: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Line addresses (uint64) and kinds (uint8) of the accesses of instructions
        ``[start, stop)`` of ``vcpu``."""
        ic = self.icount[vcpu]
        # Search with scalars of the array's own type: a Python int would make numpy convert
        # the whole array on every call.
        lo = int(ic.searchsorted(ic.dtype.type(start), side="left"))
        hi = int(ic.searchsorted(ic.dtype.type(min(stop, _U32_END)), side="left"))
        addr = self.lines[vcpu][lo:hi].astype(np.uint64) << np.uint64(self.shift)
        k = self.kind[vcpu]
        return addr, (np.zeros(hi - lo, dtype=np.uint8) if k is None else k[lo:hi])

    def index(self, vcpu: int, icounts: np.ndarray) -> np.ndarray:
        """Position of the first access at or after each of ``icounts`` (int64)."""
        ic = self.icount[vcpu]
        q = np.minimum(np.asarray(icounts, dtype=np.int64), _U32_END).astype(ic.dtype)
        return ic.searchsorted(q, side="left").astype(np.int64)

    def take(self, vcpu: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Line addresses and kinds of accesses ``[lo, hi)`` (positions) of ``vcpu``."""
        addr = self.lines[vcpu][lo:hi].astype(np.uint64) << np.uint64(self.shift)
        k = self.kind[vcpu]
        return addr, (np.zeros(hi - lo, dtype=np.uint8) if k is None else k[lo:hi])

    @property
    def nbytes(self) -> int:
        own = 0 if self.private is None else sum(p.nbytes for p in self.private.values())
        return own + sum(a.nbytes + b.nbytes + (0 if c is None else c.nbytes) for a, b, c in
                         zip(self.icount.values(), self.lines.values(), self.kind.values()))


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

    Raises
    ------
    ValueError
        When a vCPU has 2**32 instructions or more, or an address lies beyond 2**32 lines.
    """
    if data is None:
        data = bool(trace.parts("mem"))
    shift = np.uint64(int(line).bit_length() - 1)
    ics, lines, kinds = {}, {}, {}
    for v in vcpus:
        rows = trace.num_rows("exec", v)
        parts_i, parts_l, parts_k = [], [], []
        for lo in range(0, rows, WINDOW_ROWS):
            s = access_stream(trace, v, lo, min(lo + WINDOW_ROWS, rows), line=line, data=data)
            if len(s.icount) and int(s.icount[-1]) >= 1 << 32:
                raise ValueError(f"{trace.path}: vCPU {v} has more than 2**32 instructions; "
                                 "the sandbox keeps 32-bit counters")
            ln = s.addr >> shift
            if len(ln) and int(ln.max()) >= 1 << 32:
                raise ValueError(f"{trace.path}: vCPU {v}: physical address "
                                 f"{int(s.addr.max()):#x} lies beyond 2**32 lines")
            parts_i.append(s.icount.astype(np.uint32))
            parts_l.append(ln.astype(np.uint32))
            if data:
                parts_k.append(s.kind)
            if progress is not None:
                progress(min(lo + WINDOW_ROWS, rows) - lo)
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt))
        ics[v] = cat(parts_i, np.uint32)
        lines[v] = cat(parts_l, np.uint32)
        kinds[v] = cat(parts_k, np.uint8) if data else None
    return Footprint(line, data, ics, lines, kinds)
