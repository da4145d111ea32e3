"""``as-traced``: every item on the core of the vCPU it ran on, each vCPU's items in the order
they ran there.

The oracle baseline of the sandbox (issue 10): it replays the trace's own schedule, so with as
many cores as vCPUs and one copy it executes exactly each vCPU's instructions, item by item,
in traced order. It reads where each item ran in the trace (``Work.trace_vcpu``,
``trace_start``), which no OS could know; every other policy must not. Interrupts wait for
their turn in that order (no preemption), and no time slices apply.

When copies of the trace's vCPUs share a core (more copies, or vCPUs, than cores hold side by
side), each (copy, vCPU) keeps its own traced order, and the core runs, of the next items of
the vCPUs it hosts, the one that is ready and first in (trace start, copy) order; it waits only
when none of them is ready. A trace start is a position in its own vCPU's instruction stream,
so it orders the items of one vCPU, not of two: a core that waited for the first in that order
across vCPUs could wait for an item whose wake-up or device request is made by an item queued
behind it (a completion at vCPU 0's start answering a request at vCPU 1's 20,000th instruction,
say), and the replay stalled until the engine forced the release (three copies of a 2-vCPU
trace on three cores, or one copy on one core).
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
        first = w.run_ptr[:-1]
        start = w.run_start[first]   # every item has at least one run
        vcpu = w.run_vcpu[first]
        n, k = len(w), sim.copies
        # every (copy, item) in the order of (trace start, copy, id): ids are unique; an item's
        # place in it is its rank
        copies = np.repeat(np.arange(k), n)
        ids = np.arange(k * n)
        by = np.lexsort((ids, copies, np.tile(start, k)))
        rank = np.empty(k * n, dtype=np.int64)
        rank[by] = np.arange(k * n)
        self._rank: list[int] = rank.tolist()
        # the items of each (copy, vCPU) in that order (a stable sort by stream), and the
        # streams each core hosts
        known = np.unique(vcpu)
        stream = copies[by] * len(known) + np.searchsorted(known, np.tile(vcpu, k)[by])
        at = np.argsort(stream, kind="stable")
        ends = np.searchsorted(stream[at], np.arange(k * len(known) + 1))
        grouped = ids[by][at]
        self._order: list[list[int]] = [grouped[ends[s]:ends[s + 1]].tolist()
                                         for s in range(k * len(known))]
        self._next = [0] * len(self._order)
        self._streams: list[list[int]] = [[] for _ in range(sim.ncores)]
        for copy in range(k):
            for j, v in enumerate(known.tolist()):
                if ends[copy * len(known) + j + 1] > ends[copy * len(known) + j]:
                    self._streams[sim.home_of(copy, v)].append(copy * len(known) + j)
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
        best, best_rank, best_s = None, -1, -1
        queued, rank = self._queued, self._rank
        for s in self._streams[core]:
            k, order = self._next[s], self._order[s]
            wk = queued.get(order[k]) if k < len(order) else None
            if wk is not None and (best is None or rank[wk.gid] < best_rank):
                best, best_rank, best_s = wk, rank[wk.gid], s
        if best is None:
            return None  # no vCPU's next traced item is ready here: wait for one
        try:
            idx = self.sim.queue(core).position(best)
        except ValueError:
            return None  # queued on another core
        self._next[best_s] += 1
        del queued[best.gid]
        return idx
