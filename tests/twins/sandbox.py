"""Twin of the sandbox engine's replay (:mod:`pysched.sandbox.engine`) on one core."""
from __future__ import annotations

import numpy as np

from pysched.models.cores.timing import stall_table
from pysched.models.machine import MachineConfig

from .caches import SlowHierarchy


def _path_stream(path):
    """The switch path's instructions one by one, cyclically: (vcpu, icount)."""
    while True:
        for v, a, b in path.runs.tolist():
            for ic in range(a, b):
                yield v, ic


def slow_as_traced(w, fp, cfg: MachineConfig, switch_cycles: int | None, path=None):
    """Plain-Python twin of the replay on one core: items in traced order, each access through
    the slow hierarchy, cycles = instructions * CPI + stalls + a switch per change of thread.

    ``switch_cycles`` None: the ``k``-th switch runs instructions ``round((k-1) * per)`` to
    ``round(k * per)`` of the switch path ``path`` (cyclic), each with its accesses, through
    the hierarchy as the last class."""
    core = cfg.cores[0]
    sched = len(w.types)
    h = SlowHierarchy(cfg.hierarchy, sched + 1)
    stall = stall_table(cfg.hierarchy, core)
    cycles, last_task, switches, done = 0.0, -1, 0, 0
    stream = None if path is None else _path_stream(path)
    for i in sorted(range(len(w)), key=lambda i: w.run_start[w.run_ptr[i]]):
        if w.task[i] >= 0 and w.task[i] != last_task:
            last_task = w.task[i]
            if switch_cycles is not None:
                cycles += switch_cycles
            else:
                switches += 1
                n = int(round(switches * path.per_switch)) - done
                done += n
                for _ in range(n):
                    v, ic = next(stream)
                    addr, kind = fp.window(v, ic, ic + 1)
                    served = h.run(0, addr, kind, np.full(len(addr), sched))
                    cycles += core.base_cpi
                    cycles += sum(stall[k, s] for k, s in zip(kind.tolist(), served))
        for r in range(w.run_ptr[i], w.run_ptr[i + 1]):
            addr, kind = fp.window(int(w.run_vcpu[r]), int(w.run_start[r]), int(w.run_stop[r]))
            served = h.run(0, addr, kind, np.full(len(addr), w.type_id[i]))
            cycles += (w.run_stop[r] - w.run_start[r]) * core.base_cpi
            cycles += sum(stall[k, s] for k, s in zip(kind.tolist(), served))
    return cycles, np.array(h.served)
