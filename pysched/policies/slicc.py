"""``slicc``: SLICC (Atta et al., as SchedTask's Table 3 configures it: zero-cost remote tag
search, no stealing).

A thread migrates, when it starts or returns to a SuperFunction, to the core whose i-cache
holds the code it is about to run. The remote tag search is approximated by where that code
ran last: the core on which a SuperFunction of the same superFuncType last finished (its
i-cache holds that code unless evicted since). The thread stays when no core has run the type
or that core already has more than ``max_queue`` items waiting (SLICC's migration is bounded
by the target's occupancy). Interrupts run where they arrive; within a core, interrupts first,
then first come first served with CFS-like slices.
"""
from __future__ import annotations

from .base import Policy


class SLICC(Policy):
    name = "slicc"
    summary = "SLICC: threads follow their code to the core whose i-cache last ran it"
    source = "SchedTask Table 3; Atta et al., SLICC (MICRO 2012)"

    def __init__(self, max_queue: int = 2) -> None:
        super().__init__()
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 0:
            raise ValueError(f"max_queue must be a whole number of queued items, at least 0 "
                             f"(0: follow a type only to an empty queue), got {max_queue!r}")
        self.max_queue = max_queue

    def attach(self, sim) -> None:
        super().attach(sim)
        self._where: dict[int, int] = {}

    def place(self, work, core: int) -> int:
        c = self._where.get(work.type_id)
        if c is None or self.sim.queue_len(c) > self.max_queue:
            return core
        return c

    def item_done(self, work, core: int, cycles: float, insns: int = 0) -> None:
        self._where[work.type_id] = core

    def pick_next(self, core: int) -> int | None:
        return self.interrupts_first(core)

    def time_slice(self, work, core: int) -> float:
        return self.cfs_slice(core)
