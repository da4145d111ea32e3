"""``selective-offload``: SelectiveOffload (Nellans et al., as SchedTask's Table 3 configures it).

Twice the cores of the other policies (``core_factor = 2``: the paper's 64-core system against
32), half for application code and half for the OS. A system call is offloaded to an OS core
when its predicted run length exceeds ``threshold`` instructions (100, Table 3); the prediction
is the mean length of that system call's earlier runs, as a run-length predictor would learn it
(a system call never seen before is not offloaded). Interrupts, bottom halves and kernel
threads stay on the application side where they arrive. No stealing. Core choice within a set,
and within a core, as :mod:`.core_split`.
"""
from __future__ import annotations

import numpy as np

from pysched.superfunctions.functype import Category

from .core_split import CoreSplit


class SelectiveOffload(CoreSplit):
    name = "selective-offload"
    summary = ("SelectiveOffload: 2x cores, half for the OS; system calls predicted longer "
               "than 100 instructions offloaded")
    source = "SchedTask Table 3; Nellans et al. (run-length-based offload)"
    core_factor = 2

    def __init__(self, threshold: int = 100) -> None:
        super().__init__()
        threshold = int(threshold)
        if threshold < 0:
            raise ValueError(f"selective-offload: threshold must not be negative, got "
                             f"{threshold}")
        self.threshold = threshold

    def attach(self, sim) -> None:
        super().attach(sim)
        n = len(sim.workload.types)
        self._insns = np.zeros(n)
        self._runs = np.zeros(n, dtype=np.int64)
        self.offloaded = 0

    def offload(self, work) -> bool:
        if work.category != int(Category.SYSCALL):
            return False
        t = work.type_id
        if self._runs[t] == 0 or self._insns[t] / self._runs[t] <= self.threshold:
            return False
        self.offloaded += 1
        return True

    def route_interrupt(self, work, arrival_core: int) -> int:
        return self._app_core(arrival_core)

    def item_done(self, work, core: int, cycles: float, insns: int = 0) -> None:
        if work.category == int(Category.SYSCALL):
            self._insns[work.type_id] += insns
            self._runs[work.type_id] += 1
