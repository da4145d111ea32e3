"""Each work item's accesses laid end to end: the compiled replay's input, built once.

A :class:`~.footprint.Footprint` keeps each vCPU's access stream in trace order; an item is a
list of runs on possibly several vCPUs (:mod:`.workload`), so the plain engine finds a chunk's
accesses run by run with binary searches and concatenations on every chunk. Here every item's
accesses are gathered once into one stream, with each access's instruction offset *within
its item* (the runs' instructions counted end to end), so a chunk ``[lo, hi)`` of an item is
one slice found by two binary searches over the item's own offsets (:mod:`.chunk_kernel`).

The same layout holds the traced switch path (:mod:`.switch_cost`) as a single stream, its
offsets counting the instructions of its ranges end to end.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


from .footprint import Footprint


@dataclass
class ItemStreams:
    """Accesses of ``len(ptr) - 1`` streams (items), stream ``i`` at ``[ptr[i], ptr[i+1])``.

    Attributes
    ----------
    ptr : numpy.ndarray of int64
        Stream bounds.
    off : numpy.ndarray of uint32 or int64
        Each access's instruction offset within its stream (non-decreasing per stream; 32
        bits when every stream is shorter than 2**32 instructions).
    line : numpy.ndarray of uint32
        Physical line number (address >> log2 line size).
    kind : numpy.ndarray of uint8
        0 fetch, 1 load, 2 store.
    private : numpy.ndarray of bool
        Whether the access moves with a copy of the workload (a copy's own data,
        :mod:`.kernel_data`); all True without a private mask.
    shift : int
        log2 of the line size.
    """

    ptr: np.ndarray
    off: np.ndarray
    line: np.ndarray
    kind: np.ndarray
    private: np.ndarray
    shift: int

    @property
    def max_len(self) -> int:
        """Accesses of the longest stream."""
        return int(np.diff(self.ptr).max()) if len(self.ptr) > 1 else 0

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.ptr, self.off, self.line, self.kind, self.private))


@numba.njit(cache=True)
def _copy_runs(runs, alo, ahi, rpos, shift_r, icount, lines, kinds, privs, has_kind, has_priv,
               off, line, kind, private):
    """Copy the accesses ``[alo[r], ahi[r])`` of each run ``r`` of ``runs`` (one vCPU's) to
    ``[rpos[r], ...)``, offsets moved by ``shift_r[r]``."""
    for r in runs:
        d = rpos[r]
        for a in range(alo[r], ahi[r]):
            off[d] = np.int64(icount[a]) + shift_r[r]  # in range: checked by the caller
            line[d] = lines[a]
            if has_kind:
                kind[d] = kinds[a]
            if has_priv:
                private[d] = privs[a]
            d += 1


def gather_streams(fp: Footprint, stream_of_run: np.ndarray, nstreams: int,
                   run_vcpu: np.ndarray, run_start: np.ndarray, run_stop: np.ndarray,
                   run_before: np.ndarray) -> ItemStreams:
    """Gather runs of the footprint into streams.

    Runs must be ordered by stream and, within a stream, in execution order;
    ``run_before[r]`` is the instructions of run ``r``'s stream before it.

    Parameters
    ----------
    fp : Footprint
    stream_of_run : array of int
        The stream each run belongs to (non-decreasing).
    nstreams : int
    run_vcpu, run_start, run_stop : array of int
        Each run's vCPU and instruction range.
    run_before : array of int
        Instructions of the run's stream before the run.
    """
    nrun = len(run_vcpu)
    alo = np.zeros(nrun, dtype=np.int64)
    ahi = np.zeros(nrun, dtype=np.int64)
    for v in np.unique(run_vcpu).tolist():
        m = run_vcpu == v
        if v not in fp.icount:
            raise ValueError(f"a run lies on vCPU {v}, which the footprint does not hold")
        alo[m] = fp.index(v, run_start[m])
        ahi[m] = fp.index(v, run_stop[m])
    lens = ahi - alo
    rpos = np.zeros(nrun + 1, dtype=np.int64)
    np.cumsum(lens, out=rpos[1:])
    total = int(rpos[-1])
    # offsets in 32 bits when every stream is shorter than 2**32 instructions (4 bytes an
    # access less)
    longest = int((run_before + (run_stop - run_start)).max()) if nrun else 0
    off = np.empty(total, dtype=np.uint32 if longest < 1 << 32 else np.int64)
    line = np.empty(total, dtype=np.uint32)
    kind = np.zeros(total, dtype=np.uint8)
    private = np.ones(total, dtype=bool)
    # the offset of an access within its stream: its instruction's place in its run plus the
    # stream's instructions before the run
    shift_r = (np.asarray(run_before, dtype=np.int64) - run_start).astype(np.int64)
    none8, noneb = np.zeros(0, np.uint8), np.zeros(0, bool)
    for v in np.unique(run_vcpu).tolist():
        k = fp.kind[v]
        p = fp.private.get(v) if fp.private is not None else None
        _copy_runs(np.flatnonzero(run_vcpu == v), alo, ahi, rpos, shift_r, fp.icount[v],
                   fp.lines[v], none8 if k is None else k, noneb if p is None else p,
                   k is not None, p is not None, off, line, kind, private)
    ptr = np.zeros(nstreams + 1, dtype=np.int64)
    np.add.at(ptr, np.asarray(stream_of_run, dtype=np.int64) + 1, lens)
    np.cumsum(ptr, out=ptr)
    return ItemStreams(ptr, off, line, kind, private, fp.shift)


def run_offsets(workload) -> np.ndarray:
    """Per run of ``workload`` (:class:`~.workload.Workload`): the instructions of its item
    before it (int64)."""
    w = workload
    lens = (w.run_stop - w.run_start).astype(np.int64)
    counts = np.diff(w.run_ptr)
    # each run's place in the runs of all items, less that of its item's first run
    before = np.cumsum(lens) - lens
    first = w.run_ptr[:-1][counts > 0]
    return before - np.repeat(before[first], counts[counts > 0])


def item_streams(workload, fp: Footprint) -> ItemStreams:
    """Every item's accesses of ``workload`` (:class:`~.workload.Workload`), one stream an
    item."""
    w = workload
    run_before = run_offsets(w)
    owner = np.repeat(np.arange(len(w), dtype=np.int64), np.diff(w.run_ptr))
    return gather_streams(fp, owner, len(w), w.run_vcpu, w.run_start, w.run_stop, run_before)
