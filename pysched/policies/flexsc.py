"""``flexsc``: FlexSC (Soares and Stumm, as SchedTask's Table 3 configures it).

Every system call runs on cores specialised for system calls (exception-less system calls
executed by kernel threads on those cores), application code on the others; a thread whose
system call runs elsewhere waits for it (the sandbox's dependencies make a single-threaded
application wait, the cost the paper reports as -75 %; its user-level scheduler costs nothing,
Table 3). The split follows the load ("run-queue balancing"): at every epoch end the number of
system-call cores becomes the system calls' share of the busy cycles times the cores (at
least one of each kind; half and half at the start). Interrupts, bottom halves and kernel
threads stay where they arrive.
"""
from __future__ import annotations

import numpy as np

from pysched.superfunctions.functype import Category

from .core_split import CoreSplit


class FlexSC(CoreSplit):
    name = "flexsc"
    summary = "FlexSC: all system calls on specialised cores, split resized every epoch"
    source = "SchedTask Table 3; Soares and Stumm, FlexSC (OSDI 2010)"

    def attach(self, sim) -> None:
        super().attach(sim)
        self._is_sys = sim.workload.type_category == int(Category.SYSCALL)

    def offload(self, work) -> bool:
        return work.category == int(Category.SYSCALL)

    def route_interrupt(self, work, arrival_core: int) -> int:
        return arrival_core

    def epoch_end(self, epoch: int, stats) -> None:
        cyc = np.asarray(stats.type_cycles, dtype=np.float64)
        total = cyc.sum()
        if total > 0:
            share = cyc[self._is_sys].sum() / total
            self.split(int(round(share * self.sim.ncores)))
