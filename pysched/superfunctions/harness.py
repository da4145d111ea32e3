"""The capture harness inside a trace's region of interest, so that analysis can leave it out.

The region of interest is opened and closed by the guest's harness (``guest/workloads/lib.sh``):
since issue 16 the ``roi-wait`` program marks the region's begin and end itself around its own
wait, so the region holds no harness process start or exit, only the end of that process's
``poll()``. Older traces opened and closed it with separate ``roi begin`` / ``roi end``
processes: the first one's exit, ``roi-wait`` and the second one's start are inside them.

The trace knows the harness by one fact only: the thread that executed the region's begin
marker (``markers`` table, ``kind`` = begin). Its key is a ``task_struct`` address, which the
kernel hands to a new task once the harness process has gone, so a key counts as the harness
until the first ``wake_up_new_task`` of that key (``wakeups`` ``kind`` = new) and no further.

What counts as the harness's work: the instances of that thread that the thread itself caused,
application code, system calls, synchronous exceptions (vectors 0-31) and instances of unknown
category. Device interrupts and bottom halves that merely landed on it are the machine's work
and stay. Approximations, written down here: the heat (:attr:`Segmentation.heat`) still holds
the harness's code frames (the segmentation kernel records them before this module knows the
harness; a few ``poll()`` return paths in a new trace); the flag is per instance, so an
instance that began as the harness's stays the harness's even when the segmentation closes it
with a later task's return (after the key passed on); old traces' ``roi-wait`` and ``roi end``
processes are other threads, which the trace cannot tell from the workload's own.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pysched.trace.clock import TraceClock
from pysched.trace.reader import Trace
from pysched.trace.schema import MARKER_BEGIN, WAKE_NEW

from .functype import Category

#: Categories of instances that the harness thread causes itself (see the module docstring).
_OWN = (int(Category.SYSCALL), int(Category.APPLICATION), int(Category.UNKNOWN))
#: Interrupt vectors below this are synchronous exceptions (the process's own faults).
_FIRST_DEVICE_VECTOR = 32


def harness_threads(trace: Trace, clock: TraceClock) -> dict[int, float]:
    """Harness thread keys of a trace, each with the machine-wide instruction count
    (:meth:`TraceClock.machine_insns`) at which its key passed to another task (``inf``:
    never, within the trace)."""
    markers = trace.table("markers").to_pandas()
    begins = markers[(markers["kind"] == MARKER_BEGIN) & (markers["thread"] != 0)]
    keys = {int(k): np.inf for k in begins["thread"].unique()}
    if not keys:
        return keys
    wake = trace.table("wakeups").to_pandas()
    new = wake[(wake["kind"] == WAKE_NEW) & wake["woken"].isin(list(keys))]
    for v, rows in new.groupby("vcpu"):
        at = clock.machine_insns(int(v), rows["icount"].to_numpy(np.float64))
        for k, m in zip(rows["woken"].to_numpy(np.uint64), at):
            keys[int(k)] = min(keys[int(k)], float(m))
    return keys


def harness_mask(instances: pd.DataFrame, threads: dict[int, float],
                 clock: TraceClock) -> np.ndarray:
    """Which rows of a segmentation's ``instances`` are the harness's own work.

    Parameters
    ----------
    instances : pandas.DataFrame
        :attr:`Segmentation.instances` (columns ``thread``, ``category``, ``number``,
        ``start_vcpu``, ``start_icount``).
    threads : dict of int to float
        :func:`harness_threads`.
    clock : TraceClock
        The trace's clock, to place each instance's start.

    Returns
    -------
    numpy.ndarray of bool, one per instance
    """
    mask = np.zeros(len(instances), dtype=bool)
    if not threads or not len(instances):
        return mask
    thread = instances["thread"].to_numpy(np.uint64)
    cat = instances["category"].to_numpy(np.int64)
    own = np.isin(cat, _OWN) | ((cat == int(Category.INTERRUPT))
                                & (instances["number"].to_numpy(np.int64) >= 0)
                                & (instances["number"].to_numpy(np.int64) < _FIRST_DEVICE_VECTOR))
    for key, until in threads.items():
        rows = np.flatnonzero((thread == np.uint64(key)) & own)
        if np.isfinite(until) and len(rows):
            start = np.empty(len(rows))
            sv = instances["start_vcpu"].to_numpy(np.int64)[rows]
            sic = instances["start_icount"].to_numpy(np.int64)[rows]
            for v in np.unique(sv):
                m = sv == v
                start[m] = clock.machine_insns(int(v), sic[m])
            rows = rows[start < until]
        mask[rows] = True
    return mask
