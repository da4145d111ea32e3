"""Which data accesses of a workload each copy has of its own, and which the copies share.

The sandbox replays ``copies = K`` copies of a workload on one simulated machine: K instances of
the traced programs on one kernel (:mod:`.engine`, Load). An instance's own data is in frames
of its own; the kernel's image data, per-CPU areas and global structures exist once. The trace
does not label frames, so this module tells them apart by who touched them in the trace
(``mem`` table accesses, attributed to the work item whose instructions made them):

* an access made by application code (a user-mode item) is the copy's own, and so is every
  access to a frame that application code touched (a user buffer the kernel copies to or
  from);
* a frame that kernel code touched on behalf of exactly one thread (that thread's system
  calls and kernel work; interrupts and bottom halves may touch it too) is that thread's:
  its kernel stack, its sockets and their buffers, the page-cache pages only it read. Each
  copy has its own;
* every other frame -- touched by the kernel for several threads, or only by interrupts and
  bottom halves -- is the kernel's, shared by every copy: global structures, per-CPU areas
  (each touched by every thread that ran on that CPU), the kernel image's data.

Approximations, written here where they are made: frames, not lines or objects (a slab page
that holds one thread's object and a global one is classed by all of them: shared); the
trace's window decides (a global structure touched by one thread only while the trace ran
counts as that thread's, so copies share a little less than they would; an object shared by
two threads of the workload, a pipe between them, is classed shared, so copies share a little
more); a thread's identity is the trace's (the kernel threads of one copy, kworkers, count as
threads of their own).

Measured on ``data/dss-mem`` (2026-11-27): 13.0 % of its data accesses are kernel code's, and
30 % of those fall in frames classed shared (4.4 % of all data accesses); the other 70 % are a
thread's own.
"""
from __future__ import annotations

import numpy as np

from pysched.superfunctions.functype import Category

from .footprint import Footprint
from .workload import Workload

_PAGE_SHIFT = 12


def copy_private(workload: Workload, footprint: Footprint) -> dict[int, np.ndarray] | None:
    """Per vCPU, a bool per access of ``footprint``: whether a copy's instance of it is the
    copy's own (True) or shared by every copy (False; always False for fetches).

    Returns None when the footprint has no data accesses.
    """
    if not footprint.data:
        return None
    w = workload
    nruns = np.diff(w.run_ptr)
    run_item = np.repeat(np.arange(len(w), dtype=np.int64), nruns)
    user_item = np.asarray(w.category) == int(Category.APPLICATION)
    fshift = np.uint64(max(_PAGE_SHIFT - footprint.shift, 0))
    per_v = {}
    for v, kinds in footprint.kind.items():
        if kinds is None:
            continue
        data = np.flatnonzero(kinds != 0)
        ic = footprint.icount[v][data].astype(np.int64)
        m = np.flatnonzero(np.asarray(w.run_vcpu) == v)
        order = np.argsort(w.run_start[m], kind="stable")
        m = m[order]
        starts, stops = w.run_start[m], w.run_stop[m]
        j = np.searchsorted(starts, ic, side="right") - 1
        ok = (j >= 0) & (ic < stops[np.maximum(j, 0)])
        item = np.where(ok, run_item[m[np.maximum(j, 0)]], -1)
        frame = footprint.lines[v][data].astype(np.uint64) >> fshift
        per_v[v] = (data, item, frame)
    if not per_v:
        return None
    # frames application code touched, and the threads whose kernel work touched each frame
    # (a (frame, thread) pair as one key: frames are line numbers, below 2**32, and so are
    # thread numbers, so the key is exact)
    user_frames, pairs = [], []
    tasks = np.asarray(w.task)
    for data, item, frame in per_v.values():
        known = item >= 0
        u = known & user_item[np.maximum(item, 0)]
        user_frames.append(np.unique(frame[u]))
        task = tasks[np.maximum(item, 0)]
        k = known & ~u & (task >= 0)
        pairs.append(np.unique((frame[k] << np.uint64(32)) | task[k].astype(np.uint64)))
    keys = np.unique(np.concatenate(pairs))
    frames, nthreads = np.unique(keys >> np.uint64(32), return_counts=True)
    own_frames = np.union1d(np.concatenate(user_frames), frames[nthreads == 1])
    out = {}
    for v, (data, item, frame) in per_v.items():
        known = item >= 0
        own = known & (user_item[np.maximum(item, 0)] | _member(frame, own_frames))
        mask = np.zeros(len(footprint.kind[v]), dtype=bool)
        mask[data[own]] = True
        out[v] = mask
    return out


def _member(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Whether each of ``x`` is in ``table`` (sorted, unique): a binary search per element,
    cheaper than :func:`numpy.isin`'s sort of both when the table is the smaller."""
    if not len(table):
        return np.zeros(len(x), dtype=bool)
    at = np.minimum(np.searchsorted(table, x), len(table) - 1)
    return table[at] == x


def shared_share(footprint: Footprint) -> float:
    """Share of the footprint's data accesses that the copies share (NaN without data)."""
    if not footprint.data or footprint.private is None:
        return float("nan")
    data = sum(int(np.count_nonzero(k != 0)) for k in footprint.kind.values() if k is not None)
    own = sum(int(np.count_nonzero(p)) for p in footprint.private.values())
    return 1.0 - own / data if data else float("nan")
