"""CFS, the fair class of Linux's scheduler (``kernel/sched/fair.c``), as a component
(:class:`Cfs`) and as the base of the policies whose OS scheduler it is (:class:`CfsPolicy`:
``linux`` on its own; ``hrrs`` and ``fairness`` with seed 001's hardware level below it;
``cache-fair`` with seed 003's slice adjustments).

What is modelled, and where it comes from:

* **Affinity**: a thread stays on the core it last ran on; a system call (and any SuperFunction
  of the thread) runs where its thread runs; an interrupt is handled on the core where it
  arrives (the traced vCPU's core), and a bottom half where its interrupt ran (softirqs run on
  ``irq_exit`` of the raising CPU).
* **Wake-up placement** (``select_task_rq_fair`` -> ``select_idle_sibling``): the previous
  core if it is idle, else an idle core (searched from the previous one upwards: one LLC
  domain, as every core shares the L3 here), else the previous core.
* **Pick** (``pick_next_task_fair``): hardware interrupts first, then bottom halves (a pending
  interrupt is taken as soon as interrupts are enabled, softirqs run on ``irq_exit``, and a
  hardware interrupt preempts a running softirq: the engine's rule); then the queued
  thread with the least ``vruntime``: its run time so far (all threads have the default
  weight) plus the credit ``place_entity`` gives it. A thread that wakes (or starts) is
  placed at no less than its core's ``min_vruntime`` less half the scaled ``sched_latency``
  (``GENTLE_FAIR_SLEEPERS``), so a long sleep is no unbounded credit; a thread moved to
  another core by balancing keeps its ``vruntime`` relative to the cores' ``min_vruntime``
  (``migrate_task_rq_fair``). ``min_vruntime`` is each core's least ``vruntime`` of its
  running and queued threads, never decreasing.
* **Scheduling points**: a system call's entry or return is none (the engine's rule); the
  running thread yields at the end of its slice, to interrupts, and to a queued thread whose
  ``vruntime`` is behind its own by more than ``sched_wakeup_granularity`` (1 ms, scaled as
  the latency: ``check_preempt_wakeup`` at a wake-up and ``check_preempt_tick`` at the tick,
  both checked here at the end of every chunk).
* **Time slice** (``sched_slice``): ``sched_latency / nr_running``, at least
  ``min_granularity``, with the default tunables scaled by ``1 + log2(min(cores, 8))``
  (``SCHED_TUNABLESCALING_LOG``): 6 ms and 0.75 ms at one core, 24 ms and 3 ms at 8 or more.
* **Load balancing**: an idle core pulls one queued thread from the core with the longest
  queue (``newidle_balance``); at every epoch end (3 ms, close to the 4 ms
  ``balance_interval`` of a busy domain) queued threads move from the longest to the
  shortest queue while they differ by two or more (``load_balance``).

Not modelled: task weights and nice levels, NUMA, the wake-affine heuristic's preference for
the waker's core, the minimum run time before a tick preempts (``min_granularity``), and the
cost of the balancing code itself.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from .base import LATENCY_S, Policy

if TYPE_CHECKING:  # pragma: no cover
    from pysched.sandbox.engine import SimView, Work
    from pysched.sandbox.metrics import SandboxStats

    from .asymmetric import HardwareSwapper

#: ``sysctl_sched_wakeup_granularity`` at one CPU (scaled as :data:`~.base.LATENCY_S`).
WAKEUP_GRANULARITY_S = 0.001


class Cfs:
    """CFS's per-thread and per-core state and its rules, on the cores of a sandbox run.

    Attributes
    ----------
    key : callable
        ``key(task) -> float``: what the pick and the wake-up preemption compare, least first.
        :meth:`vruntime` unless the owner sets another (seed 003's cache-fair subtracts the
        CPU time it credits a thread).
    """

    def __init__(self) -> None:
        self.sim: SimView | None = None
        self.key: Callable[[int], float] = self.vruntime
        # the default key, which pick and wakeup_preempt inline (None: a subclass's own)
        self._vruntime = self.key if type(self).vruntime is Cfs.vruntime else None

    def attach(self, sim: SimView) -> None:
        """Start on ``sim``'s machine, before time 0."""
        self.sim = sim
        # the threads' run times, read at every pick and chunk end for each queued thread
        self._runtimes = sim.task_runtimes()
        self._factor = 1 + math.log2(min(sim.ncores, 8))
        # vruntime - run time, per thread (a list: read for every queued thread at a pick)
        self._lag: list[float] = [0.0] * len(self._runtimes)
        self._floor = [0.0] * sim.ncores         # min_vruntime per core

    # --- vruntime ------------------------------------------------------------------------------
    def vruntime(self, task: int) -> float:
        """Thread ``task``'s ``vruntime``: its run time plus the credit of its placements."""
        return self._runtimes[task] + self._lag[task]

    def min_vruntime(self, core: int) -> float:
        """``core``'s ``min_vruntime``: the least ``vruntime`` of its running and queued
        threads, never decreasing (unchanged while it has none)."""
        sim = self.sim
        vrs = [self.vruntime(wk.task) for wk in sim.queue(core) if not wk.is_async]
        run = sim.running(core)
        if run is not None and not run.is_async:
            vrs.append(self.vruntime(run.task))
        if vrs:
            self._floor[core] = max(self._floor[core], min(vrs))
        return self._floor[core]

    def _move(self, wk: Work, src: int, dst: int) -> None:
        # migrate_task_rq_fair: vruntime is kept relative to the queues' min_vruntime
        self._lag[wk.task] = (self._lag[wk.task] - self.min_vruntime(src)
                              + self.min_vruntime(dst))
        self.sim.move(wk, dst)

    # --- placement ---------------------------------------------------------------------------
    def thread_ready(self, work: Work, last_core: int) -> int:
        """The core where thread item ``work``, runnable again, is queued; places its
        ``vruntime`` there (``place_entity``)."""
        core = self._select(last_core)
        if work.task >= 0:
            # place_entity: a sleeper's credit is at most half the latency
            lo = self.min_vruntime(core) - self._factor * LATENCY_S / 2
            vr = self.vruntime(work.task)
            if vr < lo:
                self._lag[work.task] = self._lag[work.task] + lo - vr
        return core

    def _select(self, last_core: int) -> int:
        """``last_core`` when idle, else the first idle core after it in cyclic order, else
        ``last_core`` (``select_idle_sibling``)."""
        sim = self.sim
        if sim.is_idle(last_core):
            return last_core
        c = sim.next_idle(last_core)
        return last_core if c < 0 else c

    # --- running -----------------------------------------------------------------------------
    def pick(self, queue: list[Work]) -> int | None:
        """Index in ``queue`` of the thread item of least :attr:`key` (None: no thread)."""
        key = self.key
        default = key is self._vruntime
        runtime, lag = self._runtimes, self._lag
        best, best_rt = None, math.inf
        for idx, wk in enumerate(queue):
            if wk.is_async:
                continue
            t = wk.task
            rt = runtime[t] + lag[t] if default else key(t)  # vruntime, inlined
            if rt < best_rt:
                best, best_rt = idx, rt
        return best

    def wakeup_preempt(self, work: Work, core: int) -> bool:
        """Whether a thread queued on ``core`` is behind ``work``, running there, by more than
        the wake-up granularity."""
        if work.task < 0:
            return False
        key = self.key
        if key is self._vruntime:  # vruntime, inlined
            runtime, lag = self._runtimes, self._lag
            q = [runtime[wk.task] + lag[wk.task] for wk in self.sim.queue(core)
                 if not wk.is_async]
        else:
            q = [key(wk.task) for wk in self.sim.queue(core) if not wk.is_async]
        if not q:
            return False
        gran = self._factor * WAKEUP_GRANULARITY_S
        return key(work.task) - min(q) > gran

    # --- balancing ---------------------------------------------------------------------------
    def _threads(self, core: int) -> list[Work]:
        return [wk for wk in self.sim.queue(core) if not wk.is_async]

    def steal(self, core: int) -> None:
        """Idle ``core`` pulls the last queued thread of the core with the most queued
        threads (``newidle_balance``)."""
        sim = self.sim
        counts = list(sim.queued_threads())
        counts[core] = 0
        most = max(counts)
        if not most:
            return
        busiest = counts.index(most)  # the first of the most loaded, as a scan in core order
        # Pull only from a core that has a thread waiting behind a running one.
        if most >= 2 or sim.running(busiest) is not None:
            self._move(self._threads(busiest)[-1], busiest, core)

    def balance(self) -> None:
        """Move queued threads from the longest to the shortest queue while they differ by two
        or more (``load_balance``)."""
        sim = self.sim
        n = sim.ncores
        for _ in range(4 * n):
            queued = sim.queued_threads()
            lens = [k + (sim.running(c) is not None) for c, k in enumerate(queued)]
            hi = max(range(n), key=lens.__getitem__)
            lo = min(range(n), key=lens.__getitem__)
            if lens[hi] - lens[lo] < 2 or not queued[hi]:
                return
            self._move(self._threads(hi)[-1], hi, lo)


class CfsPolicy(Policy):
    """Base of the policies whose OS scheduler is CFS: the hooks CFS decides go to
    :attr:`cfs`, a :class:`Cfs`; subclasses add their own rules beside it, or a hardware level
    below it (:meth:`set_hardware`: seed 001's two levels)."""

    def __init__(self, **params) -> None:
        super().__init__(**params)
        self.cfs = Cfs()
        #: The hardware level below the OS, which takes the :meth:`tick` (None: none).
        self.hw: HardwareSwapper | None = None

    def set_hardware(self, hw: HardwareSwapper) -> None:
        """Put ``hw`` below the OS: attached with the policy, ticked every ``hw.quantum_s``."""
        self.hw = hw
        self.tick_s = hw.quantum_s

    def attach(self, sim: SimView) -> None:
        super().attach(sim)
        self.cfs.attach(sim)
        if self.hw is not None:
            self.hw.attach(sim)

    def tick(self) -> float | None:
        return None if self.hw is None else self.hw.tick()

    def notes(self) -> list[str]:
        return [] if self.hw is None else self.hw.notes()

    def thread_ready(self, work: Work, last_core: int) -> int:
        return self.cfs.thread_ready(work, last_core)

    def pick_next(self, core: int) -> int | None:
        q = self.sim.queue(core)
        if not q:
            return None
        # hardware interrupts, then bottom halves (softirqs run on irq_exit), then threads
        first = self.interrupts_first(core)
        if q[first].is_async:
            return first
        return self.cfs.pick(q)

    def time_slice(self, work: Work, core: int) -> float:
        return self.cfs_slice(core)

    def wakeup_preempt(self, work: Work, core: int) -> bool:
        return self.cfs.wakeup_preempt(work, core)

    def steal(self, core: int) -> None:
        self.cfs.steal(core)

    def epoch_end(self, epoch: int, stats: SandboxStats) -> None:
        self.cfs.balance()
