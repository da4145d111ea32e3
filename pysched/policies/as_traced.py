"""``as-traced``: every item on the core of the vCPU it ran on, in the order it ran there.

The oracle baseline of the sandbox (issue 10): it replays the trace's own schedule, so with as
many cores as vCPUs and one copy it executes exactly each vCPU's instructions, item by item,
in traced order. It reads where each item ran in the trace (``Work.trace_vcpu``,
``trace_start``), which no OS could know; every other policy must not. With more copies than
cores can hold side by side, copies that share a core interleave item by item in traced order.
Interrupts wait for their turn in that order (no preemption), and no time slices apply.
"""
from __future__ import annotations

import numpy as np

from .base import Policy


class AsTraced(Policy):
    name = "as-traced"
    summary = "replay the trace's own schedule: each item on its traced vCPU, in traced order"
    source = "the trace itself (validation baseline, no paper)"
    preempt_for_interrupts = False
    # the traced order decides at every item, boundaries included
    pick_at_boundaries = True

    def attach(self, sim) -> None:
        super().attach(sim)
        w = sim.workload
        # Expected order per core: (trace start, copy) of every item whose home it is.
        first = w.run_ptr[:-1]
        start = w.run_start[first]   # every item has at least one run
        vcpu = w.run_vcpu[first]
        n, k = len(w), sim.copies
        # every (copy, item) in the order of (trace start, copy, id): ids are unique
        copies = np.repeat(np.arange(k), n)
        ids = np.arange(k * n)
        by = np.lexsort((ids, copies, np.tile(start, k)))
        # each item's core from a table of every (copy, vCPU)'s, then the ids grouped by core
        # in that order (a stable sort)
        known = np.unique(vcpu)
        home = np.array([[sim.home_of(copy, v) for v in known.tolist()] for copy in range(k)],
                        dtype=np.int64).reshape(k, len(known))
        core = home[copies[by], np.searchsorted(known, np.tile(vcpu, k)[by])]
        at = np.argsort(core, kind="stable")
        ends = np.searchsorted(core[at], np.arange(sim.ncores + 1))
        grouped = ids[by][at]
        self._order: list[list[int]] = [grouped[ends[c]:ends[c + 1]].tolist()
                                         for c in range(sim.ncores)]
        self._next = [0] * sim.ncores
        # every placement hook is an enqueue: the items queued, by id, without rescans
        self._queued: dict[int, object] = {}

    def place(self, work, core: int) -> int:
        self._queued[work.gid] = work
        return self.sim.home(work)

    def resume(self, work, core: int) -> int:
        return self.place(work, core)

    def route_interrupt(self, work, arrival_core: int) -> int:
        return self.place(work, arrival_core)

    def pick_next(self, core: int) -> int | None:
        order, k = self._order[core], self._next[core]
        wk = self._queued.get(order[k]) if k < len(order) else None
        if wk is None:
            return None  # the next traced item is not ready yet: wait for it
        try:
            idx = self.sim.queue(core).position(wk)
        except ValueError:
            return None  # queued on another core
        self._next[core] = k + 1
        del self._queued[wk.gid]
        return idx
