"""Statistics of a sandbox run as records that subtract (``after - before`` = an epoch).

:class:`SandboxStats` holds cumulative counters; the engine snapshots it at every epoch
boundary and the differences are the per-epoch rows of :func:`epoch_table`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pysched.models.codes import EV_L3_HELD, MEM
from pysched.models.stats import CacheStats, Record


@dataclass(frozen=True, eq=False)
class SandboxStats(Record):
    """Counters of one run (cumulative, or the delta of an epoch).

    Attributes
    ----------
    elapsed_s : float
        Simulated seconds.
    instructions, busy_s, base_cycles, stall_cycles, switch_cycles, migration_cycles,
    energy_j : numpy.ndarray, shape (cores,)
        Per core: instructions retired, seconds busy, cycles by cause, joules (dynamic for the
        busy cycles plus static over the elapsed time).
    switches, migrations, steals : numpy.ndarray of int64, shape (cores,)
        Thread switches on a core, threads that arrived from another core, items the core
        took from other cores' queues.
    type_insns, type_cycles, type_items : numpy.ndarray, shape (types,)
        Per superFuncType id: instructions, busy cycles, finished items.
    task_insns : numpy.ndarray of int64, shape (copies, tasks)
        Progress of every thread: row ``k`` is copy ``k`` of the workload (a load of K copies
        replays each traced thread K times), column ``t`` the traced thread.
    task_want_s : numpy.ndarray, shape (copies, tasks)
        Seconds each thread was runnable or running (from an item's readiness to its end),
        counted when the item ends.
    wait_s, waits : float, int
        Run-queue waiting time of thread items (ready to running) and their number.
    irq_latency_s, irqs : float, int
        Arrival to handler start of hardware-interrupt items, and their number (the paper's
        interrupt latency, section 6.1).
    bh_latency_s, bhs : float, int
        The same of bottom-half items (a policy may queue them as work of their own).
    events : int
        Application events completed (see :mod:`pysched.sandbox.app_events`).
    cache : CacheStats
        The hierarchy's counters (class = superFuncType id; the last class is the context-
        switch path, :attr:`pysched.sandbox.engine.Engine.sched_class`).
    switch_insns : numpy.ndarray of int64, shape (cores,)
        Instructions of the traced switch path the cores ran (0 under a constant switch
        cost; not in ``instructions``, which is the workload's).
    charged_cycles : numpy.ndarray, shape (cores,)
        Cycles of the policy's own routines (``SimView.charge``: SchedTask's TMigrate and
        TAlloc), part of ``busy_s`` and ``policy_cycles``.
    idle_no_work_s, idle_work_waiting_s : float
        Idle core-seconds with nothing queued anywhere, and with an item queued on some
        core (their sum is the idle core time).
    stall_split_cycles : numpy.ndarray, shape (cores, 3, 4)
        ``stall_cycles`` by access kind (instruction fetch, load, store) and the level that
        served the access (L1, L2, L3, memory): the workload's accesses each level served
        times the core's stall per access there
        (:func:`~pysched.models.cores.timing.stall_table`; an L1 hit stalls for nothing);
        the switch path's are in ``switch_cycles``.
    """

    elapsed_s: float
    instructions: np.ndarray
    busy_s: np.ndarray
    base_cycles: np.ndarray
    stall_cycles: np.ndarray
    switch_cycles: np.ndarray
    migration_cycles: np.ndarray
    energy_j: np.ndarray
    switches: np.ndarray
    migrations: np.ndarray
    steals: np.ndarray
    type_insns: np.ndarray
    type_cycles: np.ndarray
    type_items: np.ndarray
    task_insns: np.ndarray
    task_want_s: np.ndarray
    wait_s: float
    waits: int
    irq_latency_s: float
    irqs: int
    bh_latency_s: float
    bhs: int
    events: int
    cache: CacheStats
    switch_insns: np.ndarray
    charged_cycles: np.ndarray
    idle_no_work_s: float
    idle_work_waiting_s: float
    stall_split_cycles: np.ndarray

    @property
    def cycles(self) -> np.ndarray:
        return (self.base_cycles + self.stall_cycles + self.switch_cycles
                + self.migration_cycles + self.charged_cycles)

    def idle_shares(self) -> tuple[float, float]:
        """``(idle_no_work, idle_work_waiting)`` as shares of core time."""
        total = self.elapsed_s * len(self.busy_s)
        if total <= 0:
            return float("nan"), float("nan")
        return self.idle_no_work_s / total, self.idle_work_waiting_s / total

    @property
    def idle_fraction(self) -> float:
        """Share of core time spent idle."""
        total = self.elapsed_s * len(self.busy_s)
        return float(1.0 - self.busy_s.sum() / total) if total > 0 else float("nan")

    @property
    def throughput(self) -> float:
        """Instructions per simulated second, all cores."""
        return float(self.instructions.sum() / self.elapsed_s) if self.elapsed_s > 0 \
            else float("nan")

    @property
    def events_per_s(self) -> float:
        """The paper's performance measure: application events per simulated second (6.1)."""
        return self.events / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    def jain_fairness(self) -> float:
        """Jain's index of the threads' progress rates: instructions per second runnable or
        running (a thread that waits long in queues progresses slowly), over the threads
        that finished work in the interval. Replayed threads have fixed work, so their total
        instructions would say nothing about fairness."""
        m = (self.task_want_s > 0) & (self.task_insns > 0)
        x = self.task_insns[m] / self.task_want_s[m]
        if len(x) == 0:
            return float("nan")
        return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))

    def copy_fairness(self) -> float:
        """Jain's index among the copies of each traced thread, averaged over the threads
        weighted by their instructions; NaN with one copy.

        The paper's index (section 6.1, 0.99) compares threads that are copies of one
        benchmark's threads, so unequal rates there come from the schedule alone. A trace's
        threads differ in code and cache behaviour (a kworker and a server thread progress at
        different rates under any schedule), so :meth:`jain_fairness` over all of them mixes
        the workload's spread with the schedule's; the copies of one traced thread start with
        the same work at the same time, so this index measures the schedule alone. A thread
        counts when every copy of it ran in the interval.
        """
        ins = np.atleast_2d(self.task_insns).astype(np.float64)
        want = np.atleast_2d(self.task_want_s)
        if ins.shape[0] < 2:
            return float("nan")
        ok = ((want > 0) & (ins > 0)).all(axis=0)
        if not ok.any():
            return float("nan")
        x = ins[:, ok] / want[:, ok]
        index = x.sum(axis=0) ** 2 / (x.shape[0] * (x ** 2).sum(axis=0))
        return float(np.average(index, weights=ins[:, ok].sum(axis=0)))


def _share(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


def stats_row(s: SandboxStats, app_classes: np.ndarray) -> dict[str, float]:
    """The scalar metrics of one record (an epoch or a run) as a flat dict.

    ``app_classes`` lists the superFuncType ids of application code; every other class is OS
    code (system calls, interrupts, bottom halves, kernel threads).
    """
    c = s.cache
    ntypes = c.served.shape[1]
    app = [int(x) for x in app_classes]
    os_ = [k for k in range(ntypes) if k not in set(app)]
    rate = (lambda f, cls: f(cls=cls) if cls else float("nan"))
    busy = float(s.busy_s.sum())
    cyc = float(s.cycles.sum())
    share = (lambda x: float(x) / cyc if cyc > 0 else float("nan"))
    none, waiting = s.idle_shares()
    return {
        "elapsed_s": float(s.elapsed_s),
        "instructions": int(s.instructions.sum()),
        "throughput": s.throughput,
        "idle_fraction": s.idle_fraction,
        "idle_no_work": none,
        "idle_work_waiting": waiting,
        "busy_s": busy,
        "cycles": float(s.cycles.sum()),
        "icache_app": rate(c.icache_hit_rate, app),
        "icache_os": rate(c.icache_hit_rate, os_),
        "dcache_app": rate(c.dcache_hit_rate, app),
        "dcache_os": rate(c.dcache_hit_rate, os_),
        "l2_hit": c.hit_rate(1, (0, 1, 2)),
        "l3_hit": c.hit_rate(2, (0, 1, 2)),
        "migrations": int(s.migrations.sum()),
        "migration_cycles": float(s.migration_cycles.sum()),
        "switches": int(s.switches.sum()),
        "switch_cycles": float(s.switch_cycles.sum()),
        "switch_insns": int(s.switch_insns.sum()),
        "policy_cycles": float(s.charged_cycles.sum()),
        "base_cycles": float(s.base_cycles.sum()),
        "ifetch_stall_cycles": float(s.stall_split_cycles[:, 0].sum()),
        "data_stall_cycles": float(s.stall_split_cycles[:, 1:].sum()),
        # which level served the data accesses that stalled: the L2 (an L1d miss), the
        # shared L3 (a private-cache miss) or memory (a last-level miss)
        "data_stall_l2_cycles": float(s.stall_split_cycles[:, 1:, 1].sum()),
        "data_stall_l3_cycles": float(s.stall_split_cycles[:, 1:, 2].sum()),
        "data_stall_memory_cycles": float(s.stall_split_cycles[:, 1:, 3].sum()),
        # of the L3's demand misses (every class and kind), the share whose line another
        # core's L1 or L2 held: lines the non-inclusive L3 dropped while they stayed hot there
        "l3_miss_held_share": _share(int(c.events[:, EV_L3_HELD].sum()),
                                     int(c.served[..., MEM].sum())),
        "switch_share": share(s.switch_cycles.sum()),
        "migration_share": share(s.migration_cycles.sum()),
        "policy_share": share(s.charged_cycles.sum()),
        "steals": int(s.steals.sum()),
        "wait_mean_s": s.wait_s / s.waits if s.waits else float("nan"),
        "irq_latency_mean_s": s.irq_latency_s / s.irqs if s.irqs else float("nan"),
        "bh_latency_mean_s": s.bh_latency_s / s.bhs if s.bhs else float("nan"),
        "events": int(s.events),
        "events_per_s": s.events_per_s,
        "fairness": s.jain_fairness(),
        "copy_fairness": s.copy_fairness(),
        "energy_j": float(s.energy_j.sum()),
    }
