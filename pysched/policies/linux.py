"""``linux``: per-core run queues in the manner of CFS (Linux ``kernel/sched/fair.c``).

What is modelled, and where it comes from:

* **Affinity**: a thread stays on the core it last ran on; a system call (and any SuperFunction
  of the thread) runs where its thread runs; an interrupt is handled on the core where it
  arrives (the traced vCPU's core), and a bottom half where its interrupt ran (softirqs run on
  ``irq_exit`` of the raising CPU).
* **Wake-up placement** (``select_task_rq_fair`` -> ``select_idle_sibling``): the previous
  core if it is idle, else an idle core (searched from the previous one upwards: one LLC
  domain, as every core shares the L3 here), else the previous core.
* **Pick** (``pick_next_task_fair``): interrupts and bottom halves first; then the queued
  thread with the least run time so far (least ``vruntime``: all threads have the default
  weight).
* **Time slice** (``sched_slice``): ``sched_latency / nr_running``, at least
  ``min_granularity``, with the default tunables scaled by ``1 + log2(min(cores, 8))``
  (``SCHED_TUNABLESCALING_LOG``): 6 ms and 0.75 ms at one core, 24 ms and 3 ms at 8 or more.
* **Load balancing**: an idle core pulls one queued thread from the core with the longest
  queue (``newidle_balance``); at every epoch end (3 ms, close to the 4 ms
  ``balance_interval`` of a busy domain) queued threads move from the longest to the
  shortest queue while they differ by two or more (``load_balance``).

Not modelled: task weights and nice levels, NUMA, the wake-affine heuristic's preference for
the waker's core, and the cost of the balancing code itself.

Approximation, measured: the pick runs at every SuperFunction boundary (the engine asks the
policy whenever another thread waits on the core), where Linux does not schedule at a system
call's entry or return, only at blocking, wake-up preemption and the tick. So this policy
switches more often than the traced kernel: on data/dss, one copy on 2 cores, 5,501 switches
against the trace's 392 (``as-traced`` replays 385); on data/iscp 342 against 544. Each pays
the sandbox's switch cost (:mod:`pysched.sandbox.switch_cost`).
"""
from __future__ import annotations

import math

from .base import Policy


class Linux(Policy):
    name = "linux"
    summary = "CFS-like: per-core queues, affinity, least-runtime pick, time slices, balancing"
    source = "Linux kernel/sched/fair.c (CFS), as the SchedTask paper's baseline (section 6.1)"

    # --- placement ---------------------------------------------------------------------------
    def thread_ready(self, work, last_core: int) -> int:
        sim = self.sim
        if sim.is_idle(last_core):
            return last_core
        n = sim.ncores
        for k in range(1, n):
            c = (last_core + k) % n
            if sim.is_idle(c):
                return c
        return last_core

    def route_interrupt(self, work, arrival_core: int) -> int:
        return arrival_core

    # --- running -----------------------------------------------------------------------------
    def pick_next(self, core: int) -> int | None:
        q = self.sim.queue(core)
        if not q:
            return None
        best, best_rt = None, math.inf
        for idx, wk in enumerate(q):
            if wk.is_async:
                return idx
            rt = self.sim.task_runtime(wk.task)
            if rt < best_rt:
                best, best_rt = idx, rt
        return best

    def time_slice(self, work, core: int) -> float:
        return self.cfs_slice(core)

    # --- balancing ---------------------------------------------------------------------------
    def _threads(self, core: int) -> list:
        return [wk for wk in self.sim.queue(core) if not wk.is_async]

    def steal(self, core: int) -> None:
        sim = self.sim
        busiest, most = -1, 0
        for c in range(sim.ncores):
            k = len(self._threads(c))
            if c != core and k > most:
                busiest, most = c, k
        # Pull only from a core that has a thread waiting behind a running one.
        if busiest >= 0 and (most >= 2 or sim.running(busiest) is not None):
            sim.move(self._threads(busiest)[-1], core)

    def epoch_end(self, epoch: int, stats) -> None:
        sim = self.sim
        n = sim.ncores
        for _ in range(4 * n):
            lens = [len(self._threads(c)) + (sim.running(c) is not None) for c in range(n)]
            hi = max(range(n), key=lens.__getitem__)
            lo = min(range(n), key=lens.__getitem__)
            if lens[hi] - lens[lo] < 2 or not self._threads(hi):
                return
            sim.move(self._threads(hi)[-1], lo)
