"""Twin of the sandbox engine's replay (:mod:`pysched.sandbox.engine`) on one core."""
from __future__ import annotations

import numpy as np

from pysched.models.cores.timing import stall_table
from pysched.models.machine import MachineConfig

from .caches import SlowHierarchy


def slow_as_traced(w, fp, cfg: MachineConfig, switch_cycles: int):
    """Plain-Python twin of the replay on one core: items in traced order, each access through
    the slow hierarchy, cycles = instructions * CPI + stalls + a switch per change of thread."""
    core = cfg.cores[0]
    h = SlowHierarchy(cfg.hierarchy, len(w.types))
    stall = stall_table(cfg.hierarchy, core)
    cycles, last_task = 0.0, -1
    for i in sorted(range(len(w)), key=lambda i: w.run_start[w.run_ptr[i]]):
        if w.task[i] >= 0 and w.task[i] != last_task:
            cycles += switch_cycles
            last_task = w.task[i]
        for r in range(w.run_ptr[i], w.run_ptr[i + 1]):
            addr, kind = fp.window(int(w.run_vcpu[r]), int(w.run_start[r]), int(w.run_stop[r]))
            served = h.run(0, addr, kind, np.full(len(addr), w.type_id[i]))
            cycles += (w.run_stop[r] - w.run_start[r]) * core.base_cpi
            cycles += sum(stall[k, s] for k, s in zip(kind.tolist(), served))
    return cycles, np.array(h.served)
